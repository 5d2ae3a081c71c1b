import type { Readable } from 'node:stream';

/**
 * Calls `gone` if `input` ends before anything was sent on it, and stops looking at the first
 * byte (left unread, for the server that reads it later) or at the returned stop. `switchyard
 * stdio` waits up to 10 s for the ledger's lock; a client that went away meanwhile (its stdin
 * closed, nothing asked) left it waiting out the full time for nobody, then exit 2. A client
 * that sent a request and then closed its side may still read the answer: that one waits.
 */
export function whenEndedEmpty(input: Readable, gone: () => void): () => void {
  // Paused mode: 'readable' comes with data (left in the buffer, not read) or at the end.
  const onReadable = (): void => {
    stop();
    if (input.readableLength === 0) gone();
  };
  const stop = (): void => void input.removeListener('readable', onReadable);
  input.on('readable', onReadable);
  return stop;
}
