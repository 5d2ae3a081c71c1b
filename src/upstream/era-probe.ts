/**
 * Reading the answer to a `server/discover` probe (digest §2.3). Pure functions, so every
 * verdict rule is testable without a peer.
 */
import { LEGACY_VERSIONS, MODERN } from '../protocol/era.js';
import { HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION, type RpcErrorObject } from '../protocol/errors.js';
import type { Id, Message, Response } from '../protocol/jsonrpc.js';
import { isObj } from '../protocol/jsonrpc.js';
import { redactErrorText } from '../policy/secret-text.js';
import { answerIn } from './http-answers.js';

export type ProbeVerdict =
  /** A DiscoverResult naming our version: ready to use. */
  | { kind: 'modern'; discover: Record<string, unknown> }
  /** Proven modern, but without a usable DiscoverResult yet: ask again (never fall back). */
  | { kind: 'modern-retry'; reason: string }
  /** It names the versions it speaks, and the hub speaks none of them. */
  | { kind: 'unsupported'; supported: string[] }
  | { kind: 'legacy'; reason: string; respawn?: boolean }
  /** HTTP only: auth, server or network trouble says nothing about the era. */
  | { kind: 'no-evidence'; reason: string; /** A busy server's Retry-After. */ retryAfterMs?: number };

function stringList(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string') ? (v as string[]) : undefined;
}

/** What keeps `r` from being a DiscoverResult (a non-empty `supportedVersions` and a `capabilities` object), or undefined. */
export function discoverProblem(r: unknown): string | undefined {
  if (!isObj(r)) return 'not an object';
  if (stringList(r.supportedVersions) === undefined) return 'supportedVersions is not a non-empty array of strings';
  if (!isObj(r.capabilities)) return 'capabilities is not an object';
  return undefined;
}

export function isDiscoverResult(r: unknown): r is Record<string, unknown> {
  return discoverProblem(r) === undefined;
}

function fromResult(result: Record<string, unknown>): ProbeVerdict {
  const problem = discoverProblem(result);
  if (problem !== undefined) return { kind: 'legacy', reason: `server/discover answered with something that is not a DiscoverResult (${problem})` };
  const versions = result.supportedVersions as string[];
  return versions.includes(MODERN) ? { kind: 'modern', discover: result } : withoutModern(versions, 'server/discover');
}

/**
 * A server that names its versions without ours: the only versions we share are legacy ones,
 * which are spoken after `initialize` (digest §2.2: "the client has to do `initialize`"), or none.
 */
function withoutModern(supported: string[], said: string): ProbeVerdict {
  const shared = supported.filter((v) => (LEGACY_VERSIONS as readonly string[]).includes(v));
  return shared.length > 0 ? { kind: 'legacy', reason: `${said} lists only legacy versions the hub speaks (${shared.join(', ')})` } : { kind: 'unsupported', supported };
}

/** -32022 with a non-empty `supported` list is the one error that proves a modern server (or names the legacy versions to initialize with). */
function fromUnsupportedVersion(err: RpcErrorObject): ProbeVerdict | undefined {
  if (err.code !== UNSUPPORTED_PROTOCOL_VERSION || !isObj(err.data)) return undefined;
  const supported = stringList(err.data.supported);
  if (supported === undefined) return undefined;
  return supported.includes(MODERN) ? { kind: 'modern-retry', reason: `-32022 although ${MODERN} is listed as supported` } : withoutModern(supported, '-32022');
}

export type StdioProbeOutcome =
  | { kind: 'result'; result: Record<string, unknown> }
  | { kind: 'error'; error: RpcErrorObject }
  | { kind: 'timeout' }
  | { kind: 'exit' };

/** stdio: anything but a DiscoverResult or a -32022 with `supported` means legacy. */
export function stdioVerdict(o: StdioProbeOutcome): ProbeVerdict {
  switch (o.kind) {
    case 'result':
      return fromResult(o.result);
    case 'error':
      return fromUnsupportedVersion(o.error) ?? { kind: 'legacy', reason: `server/discover answered ${said(o.error)}` };
    case 'timeout':
      return { kind: 'legacy', reason: 'no answer to server/discover' };
    case 'exit':
      return { kind: 'legacy', reason: 'process exited on server/discover', respawn: true };
  }
}

/** An upstream's error as a verdict's reason says it: reasons reach logs, /healthz and callers, so without a credential it echoed. */
function said(e: RpcErrorObject): string {
  return `${e.code} ${redactErrorText(String(e.message))}`;
}

function firstError(messages: Message[]): RpcErrorObject | undefined {
  for (const m of messages) if ('error' in m && isObj(m.error)) return m.error;
  return undefined;
}

/**
 * The responses that answer the probe: those naming its id, and an id-less (or null-id) error,
 * which is the POST's refusal of the one request it carried. A response naming another
 * request (a proxy that mixed up streams, a server replaying an old answer) says nothing
 * about this server's answer to the probe: it is no evidence, whatever it holds.
 */
function answersProbe(m: Message, probeId: Id): m is Response {
  if (!('result' in m) && !('error' in m)) return false;
  return m.id === probeId || ('error' in m && (m.id === undefined || m.id === null));
}

/**
 * HTTP: `status` and the JSON-RPC messages read from the answer (one JSON body, or the
 * messages of an SSE stream; for a non-2xx, the body if it parsed as JSON-RPC). `probeId`:
 * the id the probe was sent with; only a response to it counts.
 */
export function httpVerdict(status: number, messages: Message[], probeId: Id): ProbeVerdict {
  if (status === 401 || status === 403) return { kind: 'no-evidence', reason: `HTTP ${status}: authorization required` };
  if (status === 408 || status === 429 || status >= 500) return { kind: 'no-evidence', reason: `HTTP ${status}` };
  const own = messages.filter((m) => answersProbe(m, probeId));
  if (status >= 200 && status < 300) {
    for (const m of own) if ('result' in m && isObj(m.result)) return fromResult(m.result);
    const err = firstError(own);
    if (err === undefined) {
      // Only another request's response: the probe was not answered, which proves neither era.
      if (own.length < messages.filter((m) => 'result' in m || 'error' in m).length)
        return { kind: 'no-evidence', reason: `HTTP ${status}: the answer names another request, not server/discover's` };
      return { kind: 'legacy', reason: `HTTP ${status} without a JSON-RPC answer` };
    }
    return modernError(err) ?? { kind: 'legacy', reason: `server/discover answered ${said(err)}` };
  }
  if (status >= 400 && status < 500) {
    // The status is the evidence (digest §2.3, step 4); only the probe's own error can make it modern.
    const err = firstError(own);
    return (err && modernError(err)) ?? { kind: 'legacy', reason: `HTTP ${status}${err ? ` ${said(err)}` : ''}` };
  }
  return { kind: 'no-evidence', reason: `HTTP ${status}` };
}

/** Over HTTP the spec also names header mismatch and missing capability as modern signals. */
function modernError(err: RpcErrorObject): ProbeVerdict | undefined {
  const v = fromUnsupportedVersion(err);
  if (v !== undefined) return v;
  if (err.code === HEADER_MISMATCH || err.code === MISSING_CLIENT_CAPABILITY) return { kind: 'modern-retry', reason: said(err) };
  return undefined;
}

/**
 * Whether a legacy request's non-2xx answer says the server no longer speaks `version`, the one
 * its session was opened with: a -32022 whose `supported` lacks it (whatever id it names). A
 * server redeployed modern-only at the same URL (SDK v2's `legacy: 'reject'`) answers every
 * legacy request so, the request's id echoed, and was taken for that call's own error, relayed
 * at every call. It refuses before dispatch. Returns what the server said, or undefined. `id`:
 * the request's, to find its answer in a batch (answerIn).
 */
export function refusedAsLegacy(status: number, body: string | undefined, version: string, id: Id): string | undefined {
  if (status < 400 || status >= 500 || !body) return undefined;
  const c = answerIn(body, id);
  if (c?.kind !== 'response' || !('error' in c.msg) || !isObj(c.msg.error)) return undefined;
  return speaksNot(status, c.msg.error, version);
}

/**
 * Whether `error` is a -32022 whose `supported` list lacks `version`, the one the request was
 * sent in: the server no longer speaks it. Returns what the server said (for status `status`),
 * or undefined. Also for one inside a 2xx answer (a server that answers its refusals in-band).
 */
export function speaksNot(status: number, error: RpcErrorObject, version: string): string | undefined {
  if (error.code !== UNSUPPORTED_PROTOCOL_VERSION || !isObj(error.data)) return undefined;
  const supported = stringList(error.data.supported);
  if (supported === undefined || supported.includes(version)) return undefined;
  return speaksOther(status, error, supported);
}

/** A -32022 refusal in words: the status, what the server said, and the versions it speaks (cut, redacted). */
function speaksOther(status: number, error: RpcErrorObject, supported: readonly string[]): string {
  return `HTTP ${status} ${said(error)} (it speaks ${redactErrorText(supported.join(', ').slice(0, 200))})`;
}

/**
 * Whether a 2026-07-28 request's non-2xx answer says the server did not take it as one at
 * all: a server redeployed legacy-only (2025-11-25) at the same URL refuses it before
 * dispatching anything, as it refuses the probe (digest §2.3, step 4), typically with a 400
 * and an id-less error ("Mcp-Session-Id header is required", "Unsupported protocol version").
 * That is an id-less (or null-id) JSON-RPC error that is no modern signal with a 4xx, or a 400,
 * 404 or 405 with no JSON-RPC answer to the request. So is a -32022 whose `supported` lacks
 * 2026-07-28, whatever id it names: a server that no longer speaks it (a newer revision only). Not: a response naming the request (its
 * answer, whatever the status: a modern 404 + -32601 is one), a modern error (-32020, -32021,
 * a -32022 listing 2026-07-28: about the request, not the era), 401/403 (auth), 408/429 (load),
 * 413 (size) or 5xx. Returns what the server said, or undefined. `body`: the answer's body, `id`
 * the request's.
 */
export function refusedAsModern(status: number, body: string | undefined, id: Id): string | undefined {
  if (status < 400 || status >= 500 || status === 401 || status === 403 || status === 408 || status === 413 || status === 429) return undefined;
  // A batch (a 2025-03-26 server's) is read for the member answering the request (answerIn).
  const c = answerIn(body, id);
  if (c?.kind === 'response') {
    // The server no longer speaks 2026-07-28 (a -32022 whose `supported` lacks it): the era, or
    // the version, the hub holds of it is out of date, whatever id it names (SDK v2 servers
    // echo the request's). It refuses before dispatch, so the request did not run.
    if ('error' in c.msg && isObj(c.msg.error)) {
      const why = speaksNot(status, c.msg.error, MODERN);
      if (why !== undefined) return why;
    }
    const rid = c.msg.id;
    if (rid === undefined || rid === null) {
      if (!('error' in c.msg) || !isObj(c.msg.error)) return undefined;
      const v = modernError(c.msg.error);
      return v === undefined || v.kind === 'legacy' ? `HTTP ${status} ${said(c.msg.error)}` : undefined;
    }
    // As the HTTP upstream matches its answers (a number id may come back as its string).
    if (Number(rid) === Number(id)) return undefined;
  }
  return status === 400 || status === 404 || status === 405 ? `HTTP ${status} without an answer to the request` : undefined;
}
