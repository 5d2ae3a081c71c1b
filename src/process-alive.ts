import { readFileSync } from 'node:fs';

/**
 * Whether a process of this pid exists on this host (signal 0: nothing is sent). EPERM is one
 * that exists under another user; ESRCH none. Lock files (the ledger's, a login's refresh lock)
 * ask it of the pid their holder wrote.
 */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * When process `pid` started, as `<boot id>:<start time>` (Linux: the boot's random id and
 * field 22 of /proc/<pid>/stat, clock ticks since boot), so that a pid used again, after a
 * reboot or later in the same boot, is told apart. Undefined where /proc does not say.
 */
export function processStart(pid: number): string | undefined {
  try {
    const boot = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = fields[19]; // field 22: the fields after the name start at field 3
    return boot && ticks && /^[0-9]+$/.test(ticks) ? `${boot}:${ticks}` : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether the lock holder `pid` still runs: a process of that pid exists and, when the holder
 * wrote when it started (`started`, processStart) and /proc can say when this one did, the two
 * agree. A holder that crashed leaves its pid, and the pid may be another program's since (after
 * a reboot, or later in the same boot). Without `started` (an older build's lock, or no /proc)
 * alive is all that is known here.
 */
export function holderRuns(pid: number, started: string | undefined): boolean {
  if (!processAlive(pid)) return false;
  if (started === undefined) return true;
  const now = processStart(pid);
  return now === undefined || now === started;
}
