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
