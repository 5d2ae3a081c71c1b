import { readdirSync, readFileSync } from 'node:fs';

/** A process as /proc shows it (Linux only, like the rest of the suite). */
export interface Proc {
  pid: number;
  /** Its parent. */
  ppid: number;
  /** Its process group. */
  pgrp: number;
}

/** Every process still running (zombies left out: they have exited, only not been reaped). */
export function liveProcesses(): Proc[] {
  const out: Proc[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${d}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so read after the last ')'.
    const [state, ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (state !== 'Z') out.push({ pid: Number(d), ppid: Number(ppid), pgrp: Number(pgrp) });
  }
  return out;
}

/** Its state letter in /proc/PID/stat (`T` stopped, `Z` a zombie), or undefined once it is gone (or without /proc). */
export function processState(pid: number): string | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // After the last ')', as liveProcesses reads it.
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
}

/** Its command line, or '' once it is gone. */
export function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
  } catch {
    return '';
  }
}

/** Its environment as `NAME=value` entries; [] once it is gone or when it is not ours to read. */
export function environOf(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/**
 * Milliseconds a process's main thread has spent ready to run but waiting for a CPU (the run
 * queue: schedstat's second field), since it started; 0 once it is gone. What a loaded machine
 * adds to a wall-clock time, which the process's own work does not.
 */
export function cpuWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0;
  }
}

/**
 * Whether the process still runs. A zombie (killed, not reaped yet) does not: an orphan is
 * reaped by whatever PID 1 the machine has, which on a busy CI box may take its time.
 */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // Undefined without /proc (not Linux): kill(0) is all there is.
  return processState(pid) !== 'Z';
}
