/**
 * The three things a server may ask a client mid-call (digest §5.1) and the shapes of their
 * answers: checked where the hub passes an answer on, so a value of the wrong shape never reaches
 * an upstream as the result of its request, and where an upstream's `input_required` is read, so
 * one that breaks the protocol is told as the upstream's fault, not the client's.
 */
import { isObj } from './jsonrpc.js';
import { setField } from './copy.js';

/**
 * Questions of one call open at its client at once: a legacy server's requests to the client,
 * or the entries of one modern `input_required` round the hub asks a legacy client. Past this,
 * a server asking hundreds in one call (a loop gone wrong, a hostile one) would have each held
 * in the hub and put before the user at once.
 */
export const MAX_OPEN_ASKS = 32;

/** The only methods an `inputRequests` entry (or a legacy server → client request the hub relays) may name. */
export const INPUT_METHODS: readonly string[] = ['elicitation/create', 'sampling/createMessage', 'roots/list'];

const ELICIT_ACTIONS = ['accept', 'decline', 'cancel'];

/**
 * What is wrong with `value` as the answer to a `method` request (ElicitResult,
 * CreateMessageResult, ListRootsResult), or undefined when it has that shape. Only what the
 * schemas require is checked; extra keys pass.
 */
export function inputResultProblem(method: string, value: unknown): string | undefined {
  if (!isObj(value)) return `an answer to ${method} must be an object`;
  switch (method) {
    case 'elicitation/create': {
      if (!ELICIT_ACTIONS.includes(value.action as string)) return 'action must be "accept", "decline" or "cancel"';
      const content = value.content;
      // Only an accept carries content; null is how loose serialisers write an absent field.
      if (content === undefined || content === null || value.action !== 'accept') return undefined;
      if (!isObj(content)) return 'content must be an object';
      for (const v of Object.values(content)) {
        const ok = typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
        if (!ok) return 'content values must be strings, numbers, booleans or arrays of strings';
      }
      return undefined;
    }
    case 'sampling/createMessage':
      if (value.role !== 'assistant' && value.role !== 'user') return 'role must be "assistant" or "user"';
      if (typeof value.model !== 'string') return 'model must be a string';
      if (typeof value.content !== 'object' || value.content === null) return 'content must be a content block (or an array of them)';
      return undefined;
    case 'roots/list':
      if (!Array.isArray(value.roots) || !value.roots.every((r) => isObj(r) && typeof r.uri === 'string')) return 'roots must be an array of {uri}';
      return undefined;
    default:
      return undefined;
  }
}

/**
 * What is wrong with the params of a question a server asks (digest §5.1, §5.2), or undefined:
 * what both eras' schemas require of them. An `elicitation/create` needs a `message`, and by its
 * mode a `requestedSchema` (form, the default: an object schema, `{type: "object", properties}`)
 * or a `url` (URL mode), and from a 2025-11-25 server (`legacy`) an `elicitationId` with it (a
 * 2026-07-28 one has none: the hub makes one up for a legacy client, mrtr.ts toLegacyInput).
 * A `sampling/createMessage` needs `messages` and `maxTokens`. (`roots/list` needs nothing.)
 * Relayed malformed, such a question reached the client as one it could not take (a form with no
 * schema: the SDK v1 client answered -32603), and the server's mistake read as the client's.
 */
export function askParamsProblem(method: string, params: unknown, legacy: boolean): string | undefined {
  if (method === 'sampling/createMessage') {
    if (!isObj(params) || !Array.isArray(params.messages) || typeof params.maxTokens !== 'number') return 'a sampling/createMessage needs messages, an array, and maxTokens, a number';
    return undefined;
  }
  if (method !== 'elicitation/create') return undefined;
  if (!isObj(params)) return 'an elicitation/create needs params, an object';
  if (typeof params.message !== 'string') return 'an elicitation/create needs message, a string';
  const mode = params.mode;
  if (mode === 'url') {
    if (typeof params.url !== 'string') return 'a URL-mode elicitation/create needs url, a string';
    return legacy && typeof params.elicitationId !== 'string' ? 'a URL-mode elicitation/create of 2025-11-25 needs elicitationId, a string' : undefined;
  }
  if (mode !== undefined && mode !== 'form') return 'an elicitation/create mode is "form" or "url"';
  const schema = params.requestedSchema;
  if (!isObj(schema) || schema.type !== 'object' || !isObj(schema.properties))
    return 'a form-mode elicitation/create needs requestedSchema, an object schema ({"type": "object", "properties": {...}})';
  return undefined;
}

/**
 * An answer that passed inputResultProblem as the asker's schema takes it: an elicitation
 * answer's content left out when it is null or the action is not accept (a Go struct without
 * omitempty, pydantic without exclude_none write `"content": null`, which the SDKs refuse).
 */
export function normalInputResult(method: string, value: Record<string, unknown>): Record<string, unknown> {
  if (method !== 'elicitation/create' || !('content' in value) || (value.content !== null && value.action === 'accept')) return value;
  const { content: _dropped, ...rest } = value;
  return rest;
}

/**
 * A `roots/list` answer as a legacy server takes it: roots whose URI is not `file://` left out
 * (2025-11-25 allows only those; the SDK v1 server refuses the whole answer for one other, so
 * one remote or virtual workspace of the client would cost the call every root). `dropped` is
 * how many were left out; the answer itself when none was.
 */
export function fileRootsOnly(value: Record<string, unknown>): { result: Record<string, unknown>; dropped: number } {
  const roots = value.roots;
  if (!Array.isArray(roots)) return { result: value, dropped: 0 };
  const kept = roots.filter((r) => isObj(r) && typeof r.uri === 'string' && r.uri.startsWith('file://'));
  if (kept.length === roots.length) return { result: value, dropped: 0 };
  return { result: { ...value, roots: kept }, dropped: roots.length - kept.length };
}

/** The `_meta` key by which a legacy server's request names the task it belongs to (digest §15). */
export const RELATED_TASK = 'io.modelcontextprotocol/related-task';

/**
 * Who a relayed question is said to come from: the server's id, unless the config trusts the
 * server (`"trust": "trusted"`, such as a hub behind this one, which names its own servers).
 */
export function askerOf(server: { id: string; config: { trust: string } }): string | undefined {
  return server.config.trust === 'trusted' ? undefined : server.id;
}

/**
 * The `_meta` key by which the hub says which untrusted server a question it relays to a legacy
 * client comes from (relayedInput): its params have `_meta` there (2025-11-25 RequestParams),
 * and a sampling request has no message to name the server in. Modern embedded requests get
 * none: the 2026-07-28 sampling and URL-mode elicitation params have no `_meta`.
 */
export const ASKER_META = 'dev.switchyard/server';

/** An untrusted server's elicitation message as the user is shown it: `[<server id>] <message>`. */
export function namedAsker(asker: string, message: string): string {
  return `[${asker}] ${message}`;
}

/**
 * A server's request as the hub puts it to a client: a sampling request's `includeContext`
 * other than "none" left out (the schemas' default). The hub declares `sampling.context` to no
 * upstream, and a client that honoured it anyway would attach the context of its server — the
 * hub, so every upstream's — or of all its servers, for the one upstream that asked. Its
 * `_meta` related-task left out too: the hub offers its clients no tasks, so the task it names
 * is one the hub runs itself for the client (legacy-task.ts), which the client never saw and
 * cannot ask about (the hub routes the answer by its own request id, not by the task). And, when
 * `asker` is given (the id of the untrusted server asking, askerOf), an elicitation's message
 * says which server asks: behind the hub every question seems the hub's, and the user judges a
 * question (a token asked for, a URL to open) by who asks it. So does `_meta[ASKER_META]` of
 * every question to a legacy client (`inMeta`), sampling's among them, which has no message (its
 * messages and system prompt are the model's input, not the hub's to change); an untrusted
 * server's own value there is never passed on, to a client of either era. The request itself
 * when there is nothing to change.
 */
export function relayedInput<R extends { method: string; params?: Record<string, unknown> }>(req: R, asker?: string, inMeta = false): R {
  const ctx = req.params?.includeContext;
  const dropContext = req.method === 'sampling/createMessage' && ctx !== undefined && ctx !== 'none';
  const meta = req.params?._meta;
  const dropTask = isObj(meta) && Object.hasOwn(meta, RELATED_TASK);
  const name = asker !== undefined && req.method === 'elicitation/create' && typeof req.params?.message === 'string';
  const claim = asker !== undefined && (inMeta || (isObj(meta) && Object.hasOwn(meta, ASKER_META)));
  if (!dropContext && !dropTask && !name && !claim) return req;
  const params = { ...req.params };
  if (name) params.message = namedAsker(asker!, params.message as string);
  if (dropContext) delete params.includeContext;
  if (dropTask || claim) {
    let rest = dropTask ? withoutRelatedTask(meta as Record<string, unknown>) : isObj(meta) ? meta : undefined;
    if (claim) rest = claimed(rest, inMeta ? asker : undefined);
    if (rest !== undefined) params._meta = rest;
    else delete params._meta;
  }
  return { ...req, params };
}

/** `meta` with ASKER_META set to `asker`, or without it when undefined (no `_meta` left: undefined). */
function claimed(meta: Record<string, unknown> | undefined, asker: string | undefined): Record<string, unknown> | undefined {
  const { [ASKER_META]: _theirs, ...rest } = meta ?? {};
  if (asker !== undefined) return { ...rest, [ASKER_META]: asker };
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/**
 * A server's `_meta` as the hub passes it to a client: without the related-task, which names a
 * task the hub runs itself (see relayedInput). The same object when it has no such key;
 * undefined when nothing else was in it (no `_meta` rather than an empty one the server never sent).
 */
export function withoutRelatedTask(meta: Record<string, unknown>): Record<string, unknown> | undefined {
  if (!Object.hasOwn(meta, RELATED_TASK)) return meta;
  const { [RELATED_TASK]: _task, ...rest } = meta;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

/**
 * A server's notification params (a log line's, a progress's) as the hub relays them: `_meta`
 * without the related-task (withoutRelatedTask). The same params when there is none.
 */
export function relayedNotice(params: Record<string, unknown>): Record<string, unknown> {
  const meta = params._meta;
  if (!isObj(meta) || !Object.hasOwn(meta, RELATED_TASK)) return params;
  const { _meta: _dropped, ...rest } = params;
  const kept = withoutRelatedTask(meta);
  return kept === undefined ? rest : { ...rest, _meta: kept };
}

/** `inputRequests` with each entry as relayedInput leaves it: the same object when none changes. */
export function relayedInputs(requests: unknown, asker?: string, inMeta = false): unknown {
  if (!isObj(requests)) return requests;
  let out: Record<string, unknown> | undefined;
  for (const [k, r] of Object.entries(requests)) {
    if (!isObj(r) || typeof r.method !== 'string') continue;
    const relayed = relayedInput(r as { method: string; params?: Record<string, unknown> }, asker, inMeta);
    if (relayed === r) continue;
    out ??= { ...requests };
    setField(out, k, relayed);
  }
  return out ?? requests;
}

/**
 * What is wrong with an upstream's `inputRequests` (a map of key → {method, params?} naming
 * only INPUT_METHODS, an elicitation of its mode's shape: askParamsProblem; digest §5.1), or undefined. `undefined` itself is fine: a result with
 * only `requestState` is allowed.
 */
export function inputRequestsProblem(requests: unknown): string | undefined {
  if (requests === undefined) return undefined;
  if (!isObj(requests)) return 'inputRequests must be a map of key to request, not ' + (Array.isArray(requests) ? 'an array' : String(requests === null ? 'null' : typeof requests));
  for (const [k, r] of Object.entries(requests)) {
    if (!isObj(r)) return `inputRequests[${JSON.stringify(k)}] is not a request object`;
    if (typeof r.method !== 'string' || !INPUT_METHODS.includes(r.method))
      return `inputRequests[${JSON.stringify(k)}] asks for ${JSON.stringify(r.method)}; only ${INPUT_METHODS.join(', ')} may be asked`;
    if (r.params !== undefined && !isObj(r.params)) return `inputRequests[${JSON.stringify(k)}].params must be an object`;
    const ask = askParamsProblem(r.method, r.params, false);
    if (ask !== undefined) return `inputRequests[${JSON.stringify(k)}]: ${ask}`;
  }
  return undefined;
}
