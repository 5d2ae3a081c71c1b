/**
 * The guarantee that no upstream child outlives the hub, even when the hub is SIGKILLed and
 * none of its own code runs. Children live in their own process groups (so `npx` grandchildren
 * can be killed with them), which also means nothing kills them when the hub dies. So the hub
 * keeps one small watchdog process, in a process group of its own, whose stdin is a pipe that
 * only the hub holds: the hub tells it which groups are alive, and when the pipe closes — the
 * hub is gone, however it went — the watchdog terminates every group it was told about.
 *
 * A child can only be announced once `spawn` has returned, and `spawn` takes tens of
 * milliseconds on a loaded machine (the fork of a large process, then the exec): a hub SIGKILLed
 * in that window left the child, and all it started, running for good. So every child also
 * carries this hub process's mark in its environment (HUB_MARK_VAR, inherited by what it
 * starts), and the watchdog, when it reaps, ends the process group of every process it finds
 * with that mark (Linux: /proc), announced or not.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';

/** The watchdog program (run with `node -e`, so it needs no file of its own in any layout). */
const WATCHDOG = `
const groups = new Set();
let buf = '';
let reaping = false;
const needle = process.argv[1] ? Buffer.from('\\0' + process.argv[1] + '\\0') : undefined;
function marked() {
  if (!needle) return;
  const fs = require('fs');
  let pids;
  try { pids = fs.readdirSync('/proc'); } catch { return; }
  for (const p of pids) {
    if (!/^[0-9]+$/.test(p) || Number(p) === process.pid) continue;
    try {
      const env = fs.readFileSync('/proc/' + p + '/environ');
      if (!Buffer.concat([Buffer.from('\\0'), env]).includes(needle)) continue;
      const stat = fs.readFileSync('/proc/' + p + '/stat', 'utf8');
      const g = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (g > 1) groups.add(g);
    } catch {}
  }
}
function reap() {
  if (reaping) return;
  reaping = true;
  const kill = (sig) => { marked(); for (const g of groups) { try { process.kill(-g, sig); } catch {} } };
  kill('SIGTERM');
  setTimeout(() => { kill('SIGKILL'); process.exit(0); }, 1000);
}
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  buf += d;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    const g = Number(line.slice(1));
    if (!Number.isInteger(g) || g <= 1) continue;
    if (line[0] === '+') groups.add(g);
    else if (line[0] === '-') groups.delete(g);
  }
});
process.stdin.on('end', reap);
process.stdin.on('close', reap);
process.stdin.on('error', reap);
process.on('SIGTERM', reap);
process.on('SIGINT', () => {});
process.on('SIGHUP', () => {});
`;

const groups = new Set<number>();
let watchdog: ChildProcess | undefined;
/** How soon a watchdog that exited while the hub runs is replaced. */
const RESTART_MS = 500;

/** The variable every child of this hub carries, with this hub process's mark as its value. */
export const HUB_MARK_VAR = 'SWITCHYARD_HUB_MARK';
let mark: string | undefined;

/** This hub process's mark (random: no other process, a hub it started included, has it). */
export function hubMark(): string {
  return (mark ??= randomBytes(12).toString('hex'));
}

function write(line: string): void {
  const w = watchdog ?? start();
  if (w?.stdin?.writable) w.stdin.write(line + '\n');
}

function start(): ChildProcess | undefined {
  if (process.platform === 'win32') return undefined;
  let w: ChildProcess;
  try {
    w = spawn(process.execPath, ['--max-old-space-size=16', '-e', WATCHDOG, `${HUB_MARK_VAR}=${hubMark()}`], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  } catch {
    return undefined;
  }
  watchdog = w;
  // The watchdog must never keep the hub alive, nor die with the hub's process group.
  w.unref();
  (w.stdin as unknown as { unref?: () => void } | null)?.unref?.();
  w.stdin?.on('error', () => undefined);
  w.on('error', () => undefined);
  w.on('exit', () => {
    if (watchdog !== w) return;
    watchdog = undefined;
    // Killed by someone (the OOM killer, an operator's kill) while the hub runs: until the next
    // spawn announced a group, a hub SIGKILLed meanwhile left every server that ignores the end
    // of its stdin running for good. A new one learns every live group (and finds the marked
    // processes); one that dies as it starts is started again at most twice a second.
    if (groups.size === 0) return;
    setTimeout(() => {
      if (!watchdog && groups.size > 0) start();
    }, RESTART_MS).unref();
  });
  if (w.stdin) for (const g of groups) w.stdin.write(`+${g}\n`);
  return w;
}

/** A child's process group exists: kill it if the hub dies. */
export function adoptGroup(pgid: number): void {
  groups.add(pgid);
  if (watchdog) write(`+${pgid}`);
  else start(); // announces every group, this one included
}

/** The group is gone (its leader exited and the group was signalled). */
export function releaseGroup(pgid: number): void {
  if (!groups.delete(pgid)) return;
  if (watchdog) write(`-${pgid}`);
}

/** The watchdog's pid, for tests. */
export function watchdogPid(): number | undefined {
  return watchdog?.pid;
}
