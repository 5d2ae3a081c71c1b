/**
 * Whom a wait for an OS lock waited for (src/os-lock.ts osLockHolder): the pid /proc/locks names
 * for the lock of a file a real process holds (test/fixtures/ledger/os-lock-holder.mjs). On
 * overlayfs whose layers lie on different file systems, stat reports a device other than the one
 * /proc/locks names the file by: there the file's inode number finds it, when that is not ambiguous.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { afterEach, describe, expect, it } from 'vitest';
import { lockHolderIn, osLockHolder } from '../../src/os-lock.js';
import { ROOT } from '../helpers/hub-process.js';

const HOLDER = join(ROOT, 'test/fixtures/ledger/os-lock-holder.mjs');

/**
 * Run with `sh -c OVERLAY sh <dir> <command…>` in a mount namespace of its own: mounts an
 * overlay at <dir>/merged, its lower layer in <dir> (this machine's temporary folder), its upper
 * on a tmpfs (another file system; xino off, as by default), then runs the command there.
 */
const OVERLAY =
  'mount -t tmpfs tmpfs "$1/upper" && mkdir "$1/upper/u" "$1/upper/w" && ' +
  'mount -t overlay overlay -o "lowerdir=$1/lower,upperdir=$1/upper/u,workdir=$1/upper/w,xino=off" "$1/merged" && shift && exec "$@"';

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'sy-os-lock-'));
}

function overlayDir(): string {
  const dir = tempDir();
  for (const d of ['lower', 'upper', 'merged']) mkdirSync(join(dir, d));
  return dir;
}

/** Root may mount an overlay in a mount namespace of its own, and enter another's (nsenter). */
const canOverlay = spawnSync('unshare', ['--mount', 'sh', '-c', OVERLAY, 'sh', overlayDir(), 'true']).status === 0 && spawnSync('nsenter', ['--version']).status === 0;

let running: ChildProcess[] = [];
afterEach(async () => {
  const ending = running.filter((p) => p.exitCode === null && p.signalCode === null);
  await Promise.all(ending.map((p) => new Promise((res) => p.once('exit', res).kill('SIGKILL'))));
  running = [];
});

/** Starts `command` (os-lock-holder.mjs, or a command running it), resolves to its pid once it holds its lock. */
async function holding(command: string, args: string[]): Promise<number> {
  const p = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  running.push(p);
  let line = '(exited)';
  for await (const l of createInterface({ input: p.stdout! })) {
    line = l;
    break;
  }
  expect(line).toBe('held');
  return p.pid!;
}

const holder = (file: string): Promise<number> => holding(process.execPath, [HOLDER, file]);

/** A holder in a mount namespace of its own of `file` in the overlay at `dir`; its path from here. */
async function overlayHolder(dir: string): Promise<{ pid: number; path: string; root: string }> {
  const pid = await holding('unshare', ['--mount', 'sh', '-c', OVERLAY, 'sh', dir, process.execPath, HOLDER, join(dir, 'merged/lock')]);
  // /proc/<pid>/root: its mount namespace's view (unshare and sh exec the holder: one pid).
  const root = `/proc/${pid}/root${dir}`;
  return { pid, path: join(root, 'merged/lock'), root };
}

describe('osLockHolder', () => {
  it('names the process holding the lock of a file, by its device and inode in /proc/locks; none once it has let it go', async () => {
    const file = join(tempDir(), 'lock');
    const pid = await holder(file);
    expect(osLockHolder(file)).toBe(pid);
    running[0]!.stdin!.end();
    await new Promise((res) => running[0]!.once('exit', res));
    expect(osLockHolder(file)).toBeUndefined();
  });

  it('a file /proc/locks names by a device other than the one stat reports is found by its inode number among the write locks', async () => {
    const file = join(tempDir(), 'lock');
    const pid = await holder(file);
    const { ino, dev } = statSync(file, { bigint: true });
    const table = readFileSync('/proc/locks', 'utf8');
    const other = statSync('/proc', { bigint: true }).dev; // as overlayfs' stat would report
    expect(other).not.toBe(dev);
    expect(lockHolderIn(table, other, ino)).toBe(pid);
    // A read lock (another file's, with that inode number elsewhere) and a waiter's line are not write locks held: no doubt.
    const notHeld = `90: POSIX  ADVISORY  READ  1 00:01:${ino} 0 EOF\n91: -> POSIX  ADVISORY  WRITE 1 00:01:${ino} 0 EOF\n`;
    expect(lockHolderIn(table + notHeld, other, ino)).toBe(pid);
    // Another device's file with that inode number, write-locked too: which one is this file is not known.
    const another = `92: POSIX  ADVISORY  WRITE 1 00:01:${ino} 0 EOF\n`;
    expect(lockHolderIn(table + another, other, ino)).toBeUndefined();
    // Named with its own device, it is that line's, whatever other devices' files with that number say.
    expect(lockHolderIn(table + another, dev, ino)).toBe(pid);
  });

  it.runIf(canOverlay)('names the process holding the lock of a file on overlayfs whose layers lie on different file systems (stat reports the layer\'s device)', async () => {
    const dir = overlayDir();
    const { pid, path, root } = await overlayHolder(dir);
    // The kernel names the file by the overlay's device (its folder's), stat by its upper layer's.
    expect(statSync(path).dev).not.toBe(statSync(join(root, 'merged')).dev);
    expect(osLockHolder(path)).toBe(pid);
    // The upper layer's own file has that inode number on the tmpfs' device: locked there too
    // (another inode of the kernel's), which of the two is the overlay's file is not known.
    // Locked from the holder's mount namespace: SQLite resolves /proc/<pid>/root to this one's `/`.
    expect(statSync(join(root, 'upper/u/lock')).ino).toBe(statSync(path).ino);
    await holding('nsenter', ['--target', String(pid), '--mount', process.execPath, HOLDER, join(dir, 'upper/u/lock')]);
    expect(osLockHolder(path)).toBeUndefined();
  });
});
