/**
 * A sampling request as a legacy client that negotiated a revision older than 2025-11-25 can
 * take it. Its messages' content is one block (an array of blocks, and the tool_use and
 * tool_result blocks, came with 2025-11-25), and before 2025-03-26 a text or image block only
 * (audio came then). Such a client's schema fails the whole request on a block it does not know,
 * so the server would hear a client error it cannot make sense of, or the user be shown a
 * request the client misread. A block is the model's input, not the hub's to rewrite (a tool
 * result's audio becomes text for such a client: results.ts olderBlock; a model told "audio left
 * out" would answer as if it had heard it): a one-block array is unwrapped, which says the same,
 * and anything else such a client cannot take is refused to the server (-32602, saying what and
 * why), which may ask otherwise. Clients at 2025-11-25 (the usual) pay one string comparison.
 */
import { INVALID_PARAMS, RpcError } from '../protocol/errors.js';
import { isObj } from '../protocol/jsonrpc.js';
import type { InputRequest } from '../protocol/types.js';

/** The revision that has sampling content arrays and tool blocks. */
const ARRAYS_FROM = '2025-11-25';
/** The revision that has audio content. */
const AUDIO_FROM = '2025-03-26';

/** `req` as a client at `version` takes it (the request itself when it can as it is), or the error to refuse it with. */
export function samplingFor(req: InputRequest, version: string): InputRequest | RpcError {
  if (req.method !== 'sampling/createMessage' || version >= ARRAYS_FROM) return req;
  const messages = req.params?.messages;
  if (!Array.isArray(messages)) return req;
  let out: unknown[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObj(m)) continue;
    let content = m.content;
    if (Array.isArray(content)) {
      if (content.length !== 1) return refusal(version, `message ${i} holds ${content.length} content blocks, and a client at ${version} takes one a message`);
      content = content[0];
    }
    const type = isObj(content) ? content.type : undefined;
    if (type === 'tool_use' || type === 'tool_result') return refusal(version, `message ${i} holds a ${type} block, which came with ${ARRAYS_FROM}`);
    if (type === 'audio' && version < AUDIO_FROM) return refusal(version, `message ${i} holds audio, which came with ${AUDIO_FROM}`);
    if (content !== m.content) (out ??= messages.slice())[i] = { ...m, content };
  }
  return out === undefined ? req : { ...req, params: { ...req.params, messages: out } };
}

function refusal(version: string, why: string): RpcError {
  return new RpcError(INVALID_PARAMS, `the sampling request cannot be put to this client, which speaks protocol version ${version}: ${why}`);
}
