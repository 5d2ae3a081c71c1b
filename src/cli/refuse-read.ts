import type { Readable } from 'node:stream';
import { INTERNAL_ERROR, RpcError } from '../protocol/errors.js';
import { errorResponse, parseFrame } from '../protocol/jsonrpc.js';

/** How long more input is waited for once none is buffered (a client's write split in two). */
const QUIET_MS = 100;
/** The longest the whole read may take: a client writing on and on does not keep the process up. */
const READ_MS = 1_000;

/**
 * `switchyard stdio` exiting before it could serve (the ledger's lock not had within its wait):
 * every request its client has sent by now is answered with `reason` (-32603 in either era: no
 * session exists, nothing ran), one line each on `out`, so none is left waiting for an answer
 * that never comes. What stdin holds is read (paused mode: nothing was read from it yet) until it
 * ends or stays quiet for QUIET_MS; a last line without its newline counts once stdin ended.
 * Notifications, responses and lines that are not a request get nothing, as JSON-RPC says; a
 * malformed request with its id gets its error.
 */
export async function refuseRead(input: Readable, out: { write(chunk: string): unknown }, reason: string): Promise<number> {
  let text = '';
  let ended = input.readableEnded;
  const deadline = Date.now() + READ_MS;
  for (;;) {
    let chunk: Buffer | string | null;
    while ((chunk = input.read() as Buffer | string | null) !== null) text += chunk.toString();
    if (ended || Date.now() >= deadline) break;
    ended = await new Promise<boolean>((res) => {
      const done = (v: boolean) => {
        clearTimeout(timer);
        input.off('readable', onReadable);
        input.off('end', onEnd);
        res(v);
      };
      const onReadable = () => done(false);
      const onEnd = () => done(true);
      const timer = setTimeout(() => done(input.readableEnded), Math.min(QUIET_MS, Math.max(0, deadline - Date.now())));
      input.on('readable', onReadable);
      input.on('end', onEnd);
    });
    if (!ended && input.readableLength === 0) break; // quiet: all the client sent is here
  }
  const lines = text.split('\n');
  if (!ended) lines.pop(); // cut short: not a line yet
  let answered = 0;
  for (const raw of lines) {
    const c = parseFrame(raw.replace(/^\uFEFF/, '').trim());
    // A malformed request with its id (params no object): its client waits on that id too.
    if (c.kind === 'invalid' && !c.response && c.id !== undefined) out.write(JSON.stringify(errorResponse(c.id, c.error)) + '\n');
    else if (c.kind !== 'request') continue;
    else out.write(JSON.stringify(errorResponse(c.msg.id, new RpcError(INTERNAL_ERROR, reason))) + '\n');
    answered++;
  }
  return answered;
}
