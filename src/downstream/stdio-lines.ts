import { INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { batchOf, classify, idKey, parseFrame, type Classified, type Id, type Params, type Request } from '../protocol/jsonrpc.js';
import type { BodyEnds } from '../transport/body-ends.js';
import { answeredId } from './oversize-body.js';

/**
 * What a line of a stdio client holds, read the one way by the serving pipe (StdioServer) and
 * by `switchyard stdio` exiting before it could serve (cli/refuse-read.ts): two readings of the
 * same input told a client different things (a batch, a line that is no JSON, an over-long one).
 * The framing itself is LineReader's, on bytes, so a character split across two reads is whole.
 */

/** The text of one line (UTF-8), a trailing CR and a leading byte order mark dropped; undefined when blank. */
export function lineText(line: Buffer): string | undefined {
  let text = line.toString('utf8');
  if (text.endsWith('\r')) text = text.slice(0, -1);
  // A byte order mark, as the HTTP reader ignores one (RFC 8259 §8.1): Windows tools (PowerShell
  // 5's redirection, Notepad) write one before the first line.
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  return text.trim() === '' ? undefined : text;
}

/** What a line longer than `maxBytes` is answered with. */
export const lineTooLarge = (maxBytes: number): RpcError => new RpcError(INVALID_REQUEST, `message too large: the limit is ${maxBytes} bytes per line`);

/**
 * A line longer than `maxBytes`, never read whole: what its two ends say it is (answeredId, as
 * for an HTTP body refused 413). A request or an unreadable message: invalid, with the id and
 * method an end shows, so the error reaches the request its client waits on (a modern client's
 * retry carrying large `inputResponses`, answered with no id, waited out its own timeout). A
 * client's answer to a question the hub put to it: a malformed response (JSON-RPC answers none),
 * which fails that question at once (Endpoint), rather than leave it open for
 * `policy.inputTimeoutMs`; without an id at either end, the one question open (`openQuestions`,
 * the pipe's legacy session's) is the one it answers.
 */
export function tooLargeLine(ends: BodyEnds, maxBytes: number, openQuestions: readonly string[] = []): Extract<Classified, { kind: 'invalid' }> {
  const seen = answeredId(ends);
  if (seen.response === true) {
    const id = seen.id ?? (openQuestions.length === 1 ? openQuestions[0] : undefined);
    const error = new RpcError(INVALID_REQUEST, `it was a line larger than the hub takes (listen.maxBodyBytes, ${maxBytes} bytes)`);
    return id === undefined ? { kind: 'invalid', error, response: true } : { kind: 'invalid', error, id, response: true };
  }
  const c: Extract<Classified, { kind: 'invalid' }> = { kind: 'invalid', error: lineTooLarge(maxBytes) };
  if (seen.id !== undefined) c.id = seen.id;
  if (seen.method !== undefined) c.method = seen.method;
  return c;
}

/** A message owed an answer: a request, or a malformed message that is no response (its client may wait on its id). */
export type Owed = { kind: 'request'; msg: Request } | (Extract<Classified, { kind: 'invalid' }> & { response?: undefined });

/**
 * The messages of a line the hub will not serve (it stops, or could not start) that are owed an
 * answer, in order: each request (refused) and each malformed message that is no response
 * (answered with its error), as JSON-RPC has it; notifications and responses get nothing.
 * `batch`: the line is a JSON array, whose answers go out together as one array (none if none is
 * owed); `member`: the member's own value (its size). An empty array is one invalid message.
 * `cancels`: the params of each notifications/cancelled in it (a request it names, read before,
 * is owed nothing: MCP has the receiver of a cancellation send no response). `at`: the
 * message's place in the line (0 for a lone message), so a cancellation later in the same
 * batch than its request is told from one before it.
 */
export function unservedLine(text: string): { batch: boolean; owed: { c: Owed; member?: unknown; at: number }[]; cancels: { params: Params; at: number }[] } {
  const members = batchOf(text);
  if (members?.length === 0) return { batch: false, owed: [{ c: { kind: 'invalid', error: new RpcError(INVALID_REQUEST, 'an empty batch') }, at: 0 }], cancels: [] };
  const owed: { c: Owed; member?: unknown; at: number }[] = [];
  const cancels: { params: Params; at: number }[] = [];
  const messages = members ? members.map((m) => [classify(m), m] as const) : [[parseFrame(text), undefined] as const];
  messages.forEach(([c, member], at) => {
    if (isOwed(c)) owed.push({ c, member, at });
    else if (c.kind === 'notification' && c.msg.method === 'notifications/cancelled') cancels.push({ params: c.msg.params ?? {}, at });
  });
  return { batch: members !== undefined, owed, cancels };
}

const isOwed = (c: Classified): c is Owed => c.kind === 'request' || (c.kind === 'invalid' && !c.response);

/**
 * The params of the last notifications/cancelled of `id` after place `at` in the same line (a
 * batch member its client cancels later in the batch), or undefined: such a request is owed no
 * answer (MCP), as serving the batch would have cancelled it.
 */
export function cancelledLater(cancels: readonly { params: Params; at: number }[], id: Id, at: number): Params | undefined {
  const key = idKey(id);
  return cancels.findLast((x) => x.at > at && (typeof x.params.requestId === 'string' || typeof x.params.requestId === 'number') && idKey(x.params.requestId) === key)?.params;
}
