/**
 * A POST body past `listen.maxBodyBytes` is refused (413) unread, but a legacy client's answer to
 * a question the hub put to it (an elicitation with a large form, a sampling result) would then
 * leave that question open until `policy.inputTimeoutMs`, and the call with it, ending "the client
 * did not answer". Only the two ends of such a body are kept, as it drains: enough to see that it
 * is a response and which request it answers (answeredId), so the question fails at once. A
 * stdio line past the limit is read the same way (stdio-lines.ts, tooLargeLine), and a request
 * on one is answered with its id.
 */
import type { Id } from '../protocol/jsonrpc.js';
import type { BodyEnds } from '../transport/body-ends.js';

export { BodyEnds } from '../transport/body-ends.js';

/** A body refused as too large; `ends` resolves once it has drained, or was cut short. */
export interface TooLarge {
  ends: Promise<BodyEnds>;
}

/** A top-level key and its value's start, at `pos`: sticky, so keys are read one after another. */
const KEY = /\s*"(jsonrpc|id|result|error|method|params)"\s*:\s*/y;
const SCALAR = /(-?\d+|"(?:[^"\\]|\\.)*")\s*,?/y;
/** A message's id as its last key (`{"result":…,"jsonrpc":"2.0","id":7}`: the SDK clients write their answers and requests so). */
const ID_LAST = /[,{]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$/;

/**
 * What the two ends of a JSON-RPC message say: `response` when its top-level keys, read from the
 * start, reach `result` or `error` before `method` or `params` (false: a request, whose `method`
 * is read too when it comes before `params`); its `id` when one of the ends shows it at the top
 * level. Undefined `response`: the head does not say.
 */
export function answeredId(ends: BodyEnds): { response?: boolean; id?: Id; method?: string } {
  const head = ends.head.replace(/^\uFEFF/, '');
  let pos = head.search(/\S/);
  if (pos < 0 || head[pos] !== '{') return {};
  pos++;
  let id: Id | undefined;
  let method: string | undefined;
  let response: boolean | undefined;
  for (;;) {
    KEY.lastIndex = pos;
    const k = KEY.exec(head);
    if (!k) break;
    pos = KEY.lastIndex;
    if (k[1] === 'params') response = false;
    if (k[1] === 'result' || k[1] === 'error') response = true;
    if (k[1] === 'params' || k[1] === 'result' || k[1] === 'error') break;
    if (k[1] === 'method') response = false;
    SCALAR.lastIndex = pos;
    const v = SCALAR.exec(head);
    if (!v) break;
    pos = SCALAR.lastIndex;
    const value = JSON.parse(v[1]!) as unknown;
    if (k[1] === 'id') id = value as Id;
    else if (k[1] === 'method' && typeof value === 'string') method = value;
  }
  if (response === undefined) return {};
  if (id === undefined) {
    const last = ID_LAST.exec(ends.tail);
    if (last) id = JSON.parse(last[1]!) as Id;
  }
  const seen: { response: boolean; id?: Id; method?: string } = { response };
  if (id !== undefined) seen.id = id;
  if (method !== undefined) seen.method = method;
  return seen;
}
