import { fstatSync, readSync } from 'node:fs';
import type { Readable } from 'node:stream';

/*
 * The last read of a stdio pipe before its process exits: `switchyard stdio` exiting before it
 * could serve (cli/refuse-read.ts), and the serving pipe's stop (StdioServer.stopReading), so that
 * what its client wrote before that moment is answered, not left unread at the exit.
 */

/**
 * Reads what `input` holds right now, without waiting: its own buffer, then (a pipe or socket,
 * which Node reads non-blocking) what the kernel holds on its descriptor. Whether anything came.
 */
export function readLeft(input: Readable, onData: (chunk: Buffer) => void, onEnd: () => void): boolean {
  let more = false;
  input.pause();
  // read() hands each chunk to the 'data' listener (onData) too.
  while (input.read() !== null) more = true;
  const fd = (input as { fd?: unknown }).fd;
  if (typeof fd !== 'number' || input.readableEnded) return more;
  try {
    const st = fstatSync(fd);
    if (!st.isFIFO() && !st.isSocket()) return more;
    const buf = Buffer.allocUnsafe(64 * 1024);
    // At most 1 MiB: a client writing on and on is not read for ever.
    for (let i = 0; i < 16; i++) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) {
        onEnd();
        return more;
      }
      more = true;
      onData(Buffer.from(buf.subarray(0, n)));
    }
    return more;
  } catch {
    // EAGAIN: nothing more now (or the descriptor cannot be read: nothing to add).
    return more;
  }
}
