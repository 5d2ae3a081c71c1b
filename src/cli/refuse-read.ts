import type { Readable } from 'node:stream';
import { cancelledLater, lineText, tooLargeLine, unservedLine } from '../downstream/stdio-lines.js';
import type { ProtocolOut } from '../log.js';
import { INTERNAL_ERROR, RpcError } from '../protocol/errors.js';
import { arrayOf, errorResponse } from '../protocol/jsonrpc.js';
import { wireText } from '../protocol/serialized.js';
import { LineReader } from '../transport/line-reader.js';
import { readLeft } from '../transport/read-left.js';
import { monotonicNow } from '../monotonic.js';

/** How long stdin must stay quiet (nothing read, no line begun, every answer written) before the exit. */
const QUIET_MS = 100;
/** The longest this may take: a client writing on and on, or not reading stdout, does not keep the process up. */
const REFUSE_MS = 3_000;

/**
 * `switchyard stdio` exiting before it could serve (a config it cannot use, an unknown --group,
 * the ledger's lock not had within its wait, a stop signal meanwhile, the hub not made): every frame its client sends until the exit is
 * answered as a stopped pipe answers it (unservedLine, shared with StdioServer), one line each
 * on `out` as it is read, so none is left waiting for an answer that never comes: each request
 * -32603 with `reason` (either era: no session exists, nothing ran), a malformed message with its
 * error, a batch's answers together, a line over `maxLineBytes` as too large (never buffered; to
 * the id an end of it shows).
 *
 * stdin is read until it ends, or until it has been quiet for QUIET_MS with every answer written
 * (a line begun waits for its end: a write split in two); while stdout is full (the client not
 * reading) stdin is left unread, so memory holds at most one line and what stdout has not taken.
 * Then what the pipe holds at that moment is read at once and answered, and the caller exits
 * right after (no await between): a request is lost only if written in the instant between that
 * last read and the exit, or after REFUSE_MS. Resolves with how many answers were written, and how
 * many of them stdout had not taken yet (REFUSE_MS ran out: the client is not reading it).
 */
export async function refuseRead(input: Readable, out: ProtocolOut, reason: string, maxLineBytes: number): Promise<{ answered: number; unsent: number }> {
  let answered = 0;
  let ended = false;
  let gone = false; // stdout broke: nobody can be told anything
  let done = false;
  /** Answers not yet handed to the pipe. */
  let unflushed = 0;
  let lastRead = monotonicNow();
  let wake: () => void = () => undefined;
  const send = (msg: object): void => {
    answered++;
    if (gone) return;
    unflushed++;
    const taken = out.write(wireText(msg) + '\n', () => {
      unflushed--;
      wake();
    });
    // stdout full: read no more until it drains ('drain' below).
    if (!taken) input.pause();
  };
  const reader = new LineReader(
    maxLineBytes,
    (line) => {
      const text = lineText(line);
      if (text === undefined) return;
      const { batch, owed, cancels } = unservedLine(text);
      // A batch member its client cancels later in the batch is owed no answer (as StdioServer's refuse).
      const answers = owed
        .filter(({ c, at }) => c.kind !== 'request' || cancelledLater(cancels, c.msg.id, at) === undefined)
        .map(({ c }) => (c.kind === 'request' ? errorResponse(c.msg.id, new RpcError(INTERNAL_ERROR, reason)) : errorResponse(c.id, c.error)));
      if (!batch) for (const a of answers) send(a);
      else if (answers.length > 0) send(arrayOf(answers));
    },
    (ends) => {
      // An answer (to a question nobody asked here) is owed nothing, as in unservedLine.
      const c = tooLargeLine(ends, maxLineBytes);
      if (!c.response) send(errorResponse(c.id, c.error));
    },
  );
  const onData = (chunk: Buffer | string): void => {
    lastRead = monotonicNow();
    reader.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    wake();
  };
  const onEnd = (): void => {
    if (ended) return;
    ended = true;
    reader.end(); // a last line without its newline counts
    wake();
  };
  const onDrain = (): void => {
    if (!ended && !done) input.resume();
    wake();
  };
  const onOutError = (): void => {
    gone = true;
    wake();
  };
  input.on('data', onData);
  input.on('end', onEnd);
  input.on('error', onEnd);
  out.on('drain', onDrain);
  out.on('error', onOutError);
  input.resume();
  if (input.readableEnded) onEnd();
  // On the monotonic clock: a wall clock stepped back kept the process up (and its client's
  // requests refused) for the step's length; stepped ahead, it exited at once.
  const deadline = monotonicNow() + REFUSE_MS;
  try {
    for (;;) {
      const now = monotonicNow();
      const written = gone || unflushed === 0;
      const quietFor = QUIET_MS - (now - lastRead);
      if (now >= deadline || (written && (ended || (quietFor <= 0 && !reader.midLine)))) {
        // The last read: what the pipe holds now, answered (then written, before the caller exits).
        const before = answered;
        const more = readLeft(input, onData, onEnd);
        if ((!more && answered === before) || now >= deadline) break;
        continue;
      }
      // Until something comes (a chunk, the end, an answer written, stdout drained) or the quiet is long enough.
      await new Promise<void>((res) => {
        const timer = setTimeout(() => wake(), Math.max(1, Math.min(quietFor > 0 ? quietFor : Infinity, deadline - now)));
        wake = () => {
          clearTimeout(timer);
          wake = () => undefined;
          res();
        };
      });
    }
  } finally {
    done = true;
    input.pause();
    input.off('data', onData);
    input.off('end', onEnd);
    input.off('error', onEnd);
  }
  return { answered, unsent: gone ? 0 : unflushed };
}
