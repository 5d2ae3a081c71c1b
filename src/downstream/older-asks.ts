/**
 * A server's question as a legacy client that negotiated a revision older than 2025-11-25 can
 * take it. Such a client's schema fails the whole request on a shape it does not know, so the
 * server would hear a client error it cannot make sense of, or the user be shown a question the
 * client misread. What says the same in the client's revision is said so; anything else is
 * refused to the server (-32602, saying what and why), which may ask otherwise. Called only for
 * such clients (LegacySession.ask): a 2025-11-25 client pays one string comparison.
 *
 * - Sampling: a message's content is one block (an array of blocks, and the tool_use and
 *   tool_result blocks, came with 2025-11-25), and before 2025-03-26 text or image only (audio
 *   came then). A block is the model's input, not the hub's to rewrite (a tool result's audio
 *   becomes text for such a client, results.ts olderBlock; a model told "audio left out" would
 *   answer as if it had heard it): a one-block array is unwrapped, which says the same.
 * - Elicitation (a form; URL mode came with 2025-11-25 and is gated by the client's declared
 *   capability): a single-select enum with titles (`oneOf` of `{const, title}`) is the older
 *   `enum` with `enumNames`; a multi-select (`type: "array"`) has no older form.
 */
import { INVALID_PARAMS, RpcError } from '../protocol/errors.js';
import { isObj } from '../protocol/jsonrpc.js';
import type { InputRequest } from '../protocol/types.js';

/** The revision that has sampling content arrays and tool blocks, titled enums and multi-selects. */
const CURRENT = '2025-11-25';
/** The revision that has audio content. */
const AUDIO_FROM = '2025-03-26';

type Obj = Record<string, unknown>;

/** `req` as a client at `version` (older than 2025-11-25) takes it (the request itself when it can as it is), or the error to refuse it with. */
export function olderAsk(req: InputRequest, version: string): InputRequest | RpcError {
  if (req.method === 'sampling/createMessage') return olderSampling(req, version);
  if (req.method === 'elicitation/create') return olderForm(req, version);
  return req;
}

function olderSampling(req: InputRequest, version: string): InputRequest | RpcError {
  const messages = req.params?.messages;
  if (!Array.isArray(messages)) return req;
  let out: unknown[] | undefined;
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (!isObj(m)) continue;
    let content = m.content;
    if (Array.isArray(content)) {
      if (content.length !== 1) return refusal('sampling', version, `message ${i} holds ${content.length} content blocks, and a client at ${version} takes one a message`);
      content = content[0];
    }
    const type = isObj(content) ? content.type : undefined;
    if (type === 'tool_use' || type === 'tool_result') return refusal('sampling', version, `message ${i} holds a ${type} block, which came with ${CURRENT}`);
    if (type === 'audio' && version < AUDIO_FROM) return refusal('sampling', version, `message ${i} holds audio, which came with ${AUDIO_FROM}`);
    if (content !== m.content) (out ??= messages.slice())[i] = { ...m, content };
  }
  return out === undefined ? req : { ...req, params: { ...req.params, messages: out } };
}

function olderForm(req: InputRequest, version: string): InputRequest | RpcError {
  const schema = req.params?.requestedSchema;
  if (!isObj(schema) || !isObj(schema.properties)) return req;
  let props: Obj | undefined;
  for (const [name, p] of Object.entries(schema.properties)) {
    if (!isObj(p)) continue;
    if (p.type === 'array') return refusal('elicitation', version, `field "${name}" is a multi-select, which came with ${CURRENT}`);
    const titled = titledEnum(p);
    if (titled === undefined) continue;
    if (titled === null) return refusal('elicitation', version, `field "${name}" is a choice whose options came with ${CURRENT}`);
    props ??= { ...schema.properties };
    props[name] = titled;
  }
  return props === undefined ? req : { ...req, params: { ...req.params, requestedSchema: { ...schema, properties: props } } };
}

/**
 * A titled single-select (`oneOf` of `{const, title}`) as 2025-06-18's `enum` with `enumNames`;
 * undefined when `p` is none, null when it is one that has no such form.
 */
function titledEnum(p: Obj): Obj | null | undefined {
  if (p.type !== 'string' || !Array.isArray(p.oneOf) || p.enum !== undefined) return undefined;
  const values: string[] = [];
  const names: string[] = [];
  for (const o of p.oneOf) {
    if (!isObj(o) || typeof o.const !== 'string') return null;
    values.push(o.const);
    names.push(typeof o.title === 'string' ? o.title : o.const);
  }
  const { oneOf: _titled, ...rest } = p;
  return { ...rest, enum: values, enumNames: names };
}

function refusal(what: 'sampling' | 'elicitation', version: string, why: string): RpcError {
  return new RpcError(INVALID_PARAMS, `the ${what} request cannot be put to this client, which speaks protocol version ${version}: ${why}`);
}
