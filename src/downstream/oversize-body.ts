/**
 * A POST body past `listen.maxBodyBytes` is refused (413) unread, but a legacy client's answer to
 * a question the hub put to it (an elicitation with a large form, a sampling result) would then
 * leave that question open until `policy.inputTimeoutMs`, and the call with it, ending "the client
 * did not answer". Only the two ends of such a body are kept, as it drains: enough to see that it
 * is a response and which request it answers (answeredId), so the question fails at once.
 */
import type { Id } from '../protocol/jsonrpc.js';

/** Bytes kept at each end: the keys and id of a response fit, whatever its result holds. */
const END_BYTES = 512;

export class BodyEnds {
  private headBuf = Buffer.alloc(0);
  private tailBuf = Buffer.alloc(0);

  add(chunk: Buffer): void {
    if (this.headBuf.length < END_BYTES) this.headBuf = Buffer.concat([this.headBuf, chunk.subarray(0, END_BYTES - this.headBuf.length)]);
    const joined = Buffer.concat([this.tailBuf, chunk.length > END_BYTES ? chunk.subarray(chunk.length - END_BYTES) : chunk]);
    this.tailBuf = joined.length > END_BYTES ? joined.subarray(joined.length - END_BYTES) : joined;
  }

  get head(): string {
    return this.headBuf.toString('utf8');
  }

  get tail(): string {
    return this.tailBuf.toString('utf8');
  }
}

/** A body refused as too large; `ends` resolves once it has drained, or was cut short. */
export interface TooLarge {
  ends: Promise<BodyEnds>;
}

/** A top-level key and its value's start, at `pos`: sticky, so keys are read one after another. */
const KEY = /\s*"(jsonrpc|id|result|error|method|params)"\s*:\s*/y;
const SCALAR = /(-?\d+|"(?:[^"\\]|\\.)*")\s*,?/y;
/** A response's id as its last key (`{"result":…,"jsonrpc":"2.0","id":7}`, as the SDK v1 client writes it). */
const ID_LAST = /[,{]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$/;

/**
 * What the two ends of a JSON-RPC message say: `response` when its top-level keys, read from the
 * start, reach `result` or `error` before `method` or `params` (a request); its `id` when one of
 * the ends shows it at the top level. Undefined `response`: the head does not say.
 */
export function answeredId(ends: BodyEnds): { response?: boolean; id?: Id } {
  const head = ends.head.replace(/^\uFEFF/, '');
  let pos = head.search(/\S/);
  if (pos < 0 || head[pos] !== '{') return {};
  pos++;
  let id: Id | undefined;
  for (;;) {
    KEY.lastIndex = pos;
    const k = KEY.exec(head);
    if (!k) return {};
    pos = KEY.lastIndex;
    if (k[1] === 'method' || k[1] === 'params') return { response: false };
    if (k[1] === 'result' || k[1] === 'error') break;
    SCALAR.lastIndex = pos;
    const v = SCALAR.exec(head);
    if (!v) return {};
    pos = SCALAR.lastIndex;
    if (k[1] === 'id') id = JSON.parse(v[1]!) as Id;
  }
  if (id !== undefined) return { response: true, id };
  const last = ID_LAST.exec(ends.tail);
  return last ? { response: true, id: JSON.parse(last[1]!) as Id } : { response: true };
}
