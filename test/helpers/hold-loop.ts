import { existsSync, writeFileSync } from 'node:fs';

/**
 * Holds this process's event loop, as a long callback (or a machine too loaded to run it) would:
 * writes `go` (a fixture's cue to answer), then spins until `sent` exists (the fixture wrote its
 * answer into the pipe or socket; 10 s at most) and `minMs` have passed (past the timeout the
 * test set), so that a timer and the answer are both due when the loop goes on.
 */
export function holdLoop(go: string, sent: string, minMs = 400): void {
  writeFileSync(go, '');
  for (const t0 = Date.now(); (!existsSync(sent) && Date.now() - t0 < 10_000) || Date.now() - t0 < minMs; );
}

/** holdLoop in a callback run after the poll (setImmediate), where a long callback of any kind runs. */
export function holdLoopAfterPoll(go: string, sent: string, minMs = 400): Promise<void> {
  return new Promise((resolve) =>
    setImmediate(() => {
      holdLoop(go, sent, minMs);
      resolve();
    }),
  );
}
