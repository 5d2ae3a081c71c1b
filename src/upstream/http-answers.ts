/**
 * What an HTTP upstream's answer says beyond its status: the JSON-RPC error in a non-2xx body,
 * whether a 404 answers the request or says the session is gone, why a 2xx or a redirect is no
 * answer, and what an operator should do about a 401 to the hub's own credentials.
 */
import { batchOf, classify, isObj, parseFrame, type Classified, type Id } from '../protocol/jsonrpc.js';
import type { RpcError } from '../protocol/errors.js';
import { firstHeaderValue } from '../protocol/header-value.js';
import type { HttpAnswer } from '../transport/http-client.js';
import { redactedExcerpt } from '../policy/secret-text.js';
import type { BearerChallenge } from './oauth-client.js';
import type { Pending } from './pending-call.js';
import { upstreamError } from './upstream-error.js';

/** The most of a server's `error_description` a reason repeats. */
const MAX_DESCRIPTION_CHARS = 200;

/** Header names that carry a credential (a key or a token) in `headers`. */
const CREDENTIAL_HEADER = /auth|key|token/i;

/**
 * What an operator should do about a 401 to the hub's own credentials. When the hub sent one
 * (a header such as Authorization or X-Api-Key) and the challenge names an `error`
 * (`invalid_token`…), that credential was refused — a wrong key for a Switchyard hub behind this
 * one, say — and advice to set up OAuth would send the operator the wrong way. Otherwise the
 * server wants a credential. (The `error` alone cannot tell: SDK servers send `invalid_token`
 * for a request without any.)
 */
export function unauthorizedAdvice(challenge: BearerChallenge | undefined, id: string, headers: Record<string, string> | undefined): string | undefined {
  if (challenge === undefined) return undefined;
  const sent = Object.keys(headers ?? {}).some((h) => CREDENTIAL_HEADER.test(h));
  if (challenge.error === undefined || !sent)
    return `the server asks for an OAuth bearer token; give the hub a client of its authorization server in servers.${id}.oauth, or a token in its headers`;
  // The server may quote the credential it refused: redacted before the cut, or its start would show.
  const said = challenge.description ? `: ${redactedExcerpt(challenge.description, MAX_DESCRIPTION_CHARS)}` : '';
  return `the server refused the credential the hub sent (${redactedExcerpt(challenge.error, 64)}${said}): check the credential in servers.${id}.headers (or .credentials)`;
}

/** The error code of a 404 for an unknown session (SDK servers, and Switchyard's own endpoint). */
const SESSION_NOT_FOUND = -32001;

/** Whether a response's id `rid` names request `id` (a number id may come back as its string). */
function sameId(rid: unknown, id: Id): boolean {
  return rid === id || ((typeof rid === 'number' || typeof rid === 'string') && Number(rid) === Number(id));
}

/**
 * A non-2xx body read for request `id`: the message it is, or, for a batch array, the member
 * that answers the request. A 2025-03-26 server (batches were allowed then, digest §1.1) may
 * answer a POST so, its response a member: the one naming `id`, else an id-less (or null-id)
 * error, the refusal of the request the POST carried. Read as one object, such a body was no
 * JSON-RPC at all: its error lost, its session refusal taken for the call's failure. A batch
 * holding neither answers nothing: undefined (as is an empty body). An array is parsed again
 * only here, off the usual answer's path.
 */
export function answerIn(body: string | undefined, id: Id): Classified | undefined {
  if (!body) return undefined;
  const c = parseFrame(body);
  if (c.kind !== 'invalid') return c;
  const batch = batchOf(body);
  if (batch === undefined) return c;
  let refusal: Classified | undefined;
  for (const m of batch) {
    const k = classify(m);
    if (k.kind !== 'response') continue;
    const rid = k.msg.id;
    if (rid === undefined || rid === null) {
      if ('error' in k.msg) refusal ??= k;
    } else if (sameId(rid, id)) return k;
  }
  return refusal;
}

/** A JSON-RPC error carried in a non-2xx body (answerIn: for request `id`), if there is one. */
export function bodyError(body: string | undefined, id: Id): RpcError | undefined {
  const c = answerIn(body, id);
  return c?.kind === 'response' && 'error' in c.msg ? upstreamError(c.msg.error) : undefined;
}

/**
 * Whether a non-2xx body is a JSON-RPC response to `p` (its id, not an id-less error): the
 * server dispatched the request and answered it, so a 404 carrying one (a modern-style
 * "method not found") is that answer, not a session that is gone.
 */
export function answers(body: string | undefined, p: Pending): boolean {
  const c = answerIn(body, p.id);
  if (c?.kind !== 'response') return false;
  const id = c.msg.id;
  return (typeof id === 'number' || typeof id === 'string') && Number(id) === p.id;
}

/**
 * Whether a 404's body is the session-gone error (-32001, the code SDK servers give an unknown
 * session) even though it names the request: a Switchyard hub answers an ended session so, with
 * the request's id, which `answers` alone would take for the request's own answer — and an
 * outer hub would then never open a new session with it.
 */
export function sessionNotFound(body: string | undefined, id: Id): boolean {
  return bodyError(body, id)?.code === SESSION_NOT_FOUND;
}

/**
 * The session an `initialize` answer's `Mcp-Session-Id` names. A header sent twice with the same
 * id (a proxy that adds the header it passes on) names that one: taken for none, the session
 * was never sent, and a server that requires it refused every later request. Copies that
 * differ name none the hub can choose.
 */
export function sessionIdOf(header: string | string[] | undefined): string | undefined {
  const id = Array.isArray(header) ? (header.every((h) => h === header[0]) ? header[0] : undefined) : header;
  return id !== undefined && id.length > 0 ? id : undefined;
}

/** The most of a plain-text 400 read for what it says of the session: an error page is no such word. */
const SESSION_TEXT_CHARS = 200;

/**
 * What a 400 says of a server that holds no session for the request: it does not know the
 * session (not found, invalid, expired…), or it is not initialized at all (a fresh process
 * behind an old session id). Not that a session id is required: the server did not see the one
 * sent (a proxy dropped it), and a new session would not help.
 */
const NO_SESSION = /\b(?:no valid|invalid|unknown|expired)\b[^.]{0,40}\bsession|\bsession\b[^.]{0,40}\b(?:not found|expired|invalid|unknown|terminated|closed)|\bnot initiali[sz]ed/i;

/**
 * Whether a 400 to a request that named a session says the server does not hold that session.
 * The spec has 404 for it (digest §6.2), but servers built on SDK v1's examples of 2025, copied
 * widely, answer an unknown session id with 400: an id-less -32000 "Bad Request: No valid
 * session ID provided" to a POST, a plain "Invalid or missing session ID" to a GET (older
 * Python SDK servers: that plain text to both). One whose single SDK v1 transport is new
 * answers "Bad Request: Server not initialized". Every session of such a server is answered so
 * once it restarts, and the hub, taking it for the request's own error, failed every call until
 * it was restarted itself. An id-less error (or a bare text) is a refusal before dispatch: the
 * request did not run. `id`: the request's (answerIn), undefined for a GET.
 */
export function sessionRefused(body: string | undefined, id: Id | undefined): boolean {
  if (!body) return false;
  // `id` undefined: a GET's answer, which answers no request (and has no batch to read).
  const c = id === undefined ? parseFrame(body) : answerIn(body, id);
  if (c === undefined) return false;
  if (c.kind === 'response') {
    const id = c.msg.id;
    return (id === undefined || id === null) && 'error' in c.msg && isObj(c.msg.error) && NO_SESSION.test(String(c.msg.error.message));
  }
  return c.kind === 'invalid' && body.length <= SESSION_TEXT_CHARS && !body.trimStart().startsWith('<') && NO_SESSION.test(body);
}

/**
 * Why an answer carrying no JSON-RPC message is no answer, in words an operator can act on:
 * a redirect (never followed: the hub's credentials would go along to wherever it points) or a
 * 2xx body that is not JSON-RPC (a login page, a proxy, the wrong path). Undefined otherwise.
 */
export function answerProblem(a: HttpAnswer, base: string): string | undefined {
  const s = a.status;
  if (s >= 300 && s < 400) {
    const to = redirectTarget(a.headers.location, base);
    return `HTTP ${s}: the upstream redirects${to ? ` to ${to}` : ''}; the hub does not follow redirects (its credentials would go along), so point the server's url at the new address`;
  }
  if (s >= 200 && s < 300 && a.body !== undefined) {
    const ct = String(a.headers['content-type'] ?? '').split(';', 1)[0]!.trim();
    return `HTTP ${s} with ${ct ? `content type ${ct}` : 'no content type'} instead of JSON-RPC: is the server's url its MCP endpoint?`;
  }
  return undefined;
}

/** Where a redirect points, without what may be secret in a URL (credentials, query, fragment). */
function redirectTarget(location: string | string[] | undefined, base: string): string | undefined {
  const raw = firstHeaderValue(location);
  if (!raw) return undefined;
  try {
    const u = new URL(raw, base);
    return u.protocol === 'http:' || u.protocol === 'https:' ? `${u.origin}${u.pathname}` : undefined;
  } catch {
    return undefined;
  }
}
