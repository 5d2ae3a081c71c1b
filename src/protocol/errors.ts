/**
 * Error codes and error classes. JSON-RPC errors that travel on the wire are RpcError;
 * failures the hub observes locally (timeouts, transport faults) have their own classes so
 * they are never mistaken for something a peer said (digest §1.3).
 */
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
export const METHOD_NOT_FOUND = -32601;
export const INVALID_PARAMS = -32602;
export const INTERNAL_ERROR = -32603;
/** Legacy resource-not-found (modern uses INVALID_PARAMS). */
export const LEGACY_RESOURCE_NOT_FOUND = -32002;
export const URL_ELICITATION_REQUIRED = -32042;
export const HEADER_MISMATCH = -32020;
export const MISSING_CLIENT_CAPABILITY = -32021;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;
/** Implementation-defined, used by SDK 1.x for "session not found"; only ever read, never emitted. */
export const SDK_SESSION_NOT_FOUND = -32001;

/** A legacy request before initialize on a pipe (`switchyard stdio`, and `connect`, which says it as `stdio` does). */
export const NOT_INITIALIZED = 'not initialized: send initialize first';

/**
 * The code a client sees for an error the core raised with `code`: resource-not-found is
 * -32002 for legacy clients and -32602 for modern ones (the core uses -32002).
 */
export function codeSeenBy(modernClient: boolean, code: number): number {
  return modernClient && code === LEGACY_RESOURCE_NOT_FOUND ? INVALID_PARAMS : code;
}

/**
 * Whether an error's data is the 2026 resource-not-found's, {uri} and nothing more: the
 * spec's example, and what the SDK v2 sends and reads as one (its -32602 of any other data is
 * ordinary invalid params).
 */
export function namesOnlyUri(data: unknown): boolean {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return false;
  const keys = Object.keys(data);
  return keys.length === 1 && keys[0] === 'uri' && typeof (data as { uri: unknown }).uri === 'string';
}

export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** A JSON-RPC error, either received from a peer or to be sent to one. */
export class RpcError extends Error {
  override readonly name = 'RpcError';
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
  }
  toJSON(): RpcErrorObject {
    return this.data === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, data: this.data };
  }
  /**
   * A peer's error object as the hub takes it: a code that is no integer (JSON-RPC's is one; a
   * string, 1.5, 1e300) is -32603, its message kept. Passed on as it came, the hub's own answer
   * broke JSON-RPC, and a peer that refuses to read it (the SDKs do) left its request open.
   */
  static from(obj: unknown): RpcError {
    const o = (obj ?? {}) as Partial<RpcErrorObject>;
    return new RpcError(
      Number.isSafeInteger(o.code) ? o.code! : INTERNAL_ERROR,
      typeof o.message === 'string' ? o.message : 'error',
      o.data,
    );
  }
}

/**
 * An error an upstream answered, as opposed to one the hub raised: a code the spec reserves
 * means something about the request that carried it, which was the hub's, not the client's.
 */
export class UpstreamRpcError extends RpcError {}

/**
 * A client's error answer to a question the hub put to it (elicitation, sampling, roots), as
 * opposed to one the hub raised while asking (no answer in time, an answer of the wrong shape).
 */
export class ClientRpcError extends RpcError {}

/**
 * The error a client of the era given is sent for `err`: resource-not-found as codeSeenBy says,
 * and an upstream's code that is about the request the hub sent (notOursToPass) as -32603 naming
 * that code in its message: its -32020 (header mismatch) or -32022 (unsupported version) would
 * tell the client its own headers or version were wrong. Its -32021 is passed on to a modern
 * client: the capability it names is the client's to declare in its request. A legacy client's
 * era has no -32021 (mrtr.ts makes a tools/call's a tool error, a prompts/get's -32603 naming the
 * capability; any other request's, a completion's say, is -32603 naming the upstream's error here).
 * The ledger records this error, what the client got (outcomeSeenBy): the upstream's code is in its message.
 */
export function errorSeenBy(modernClient: boolean, err: RpcError): RpcError {
  if (err instanceof UpstreamRpcError && notOursToPass(modernClient, err.code))
    return new RpcError(INTERNAL_ERROR, `the upstream answered ${err.code}: ${err.message}`, err.data);
  const code = codeSeenBy(modernClient, err.code);
  return code === err.code ? err : new RpcError(code, err.message, err.data);
}

/**
 * Whether an upstream's error code may not reach a client of the era given as it is. A modern
 * client: none of -32020…-32099 but -32021 (the spec's range: implementations M!N emit the
 * undefined ones, digest §1.3). A legacy client: -32020 and -32022 (the SDK v2 client reads a
 * -32022 as an UnsupportedProtocolVersionError in either era, its own version refused) and
 * -32021, which its era lacks; the rest of that range is implementation-defined in 2025-11-25
 * (-32042 is its URL elicitation).
 */
function notOursToPass(modernClient: boolean, code: number): boolean {
  if (code === HEADER_MISMATCH || code === UNSUPPORTED_PROTOCOL_VERSION) return true;
  if (!modernClient) return code === MISSING_CLIENT_CAPABILITY;
  return code >= -32099 && code <= -32020 && code !== MISSING_CLIENT_CAPABILITY;
}

/** Base of every failure the hub itself observes (as opposed to an error a peer answered). */
export class HubError extends Error {
  override readonly name: string = 'HubError';
  readonly kind: string = 'hub';
}
/** The upstream cannot take requests now (starting, failed, stopped, circuit open). */
export class UpstreamUnavailableError extends HubError {
  override readonly name = 'UpstreamUnavailableError';
  override readonly kind = 'unavailable';
  constructor(
    readonly server: string,
    readonly state: string,
    detail?: string,
  ) {
    super(`server "${server}" is ${state}${detail ? `: ${detail}` : ''}`);
  }
}
/** No answer within the time allowed. */
export class TimeoutError extends HubError {
  override readonly name = 'TimeoutError';
  override readonly kind = 'timeout';
  /**
   * The limit that ran out was the caller's (`dev.switchyard/timeoutMs`, shorter than the
   * server's own): it says nothing about the server's health (see upstream/breaker.ts).
   */
  callers = false;
  /** Ran out before the request was sent: the upstream never saw it (see notSent). */
  notSent = false;
  constructor(
    readonly server: string,
    readonly ms: number,
  ) {
    super(`server "${server}" did not answer within ${ms} ms`);
  }
}
/**
 * The client did not answer a question the hub put to it (elicitation, sampling, roots) within
 * `policy.inputTimeoutMs`: the hub's limit ended the call, not the upstream's slowness (so no
 * evidence against the upstream: `callers`).
 */
export class InputTimeoutError extends TimeoutError {
  constructor(method: string, ms: number) {
    super('', ms);
    this.callers = true;
    this.message = `the client did not answer ${method} within ${ms} ms (policy.inputTimeoutMs)`;
  }
}
/** The caller went away or cancelled. */
export class CancelledError extends HubError {
  override readonly name = 'CancelledError';
  override readonly kind = 'cancelled';
  /** Cancelled before the request was sent: the upstream never saw it (see notSent). */
  notSent = false;
  constructor(reason = 'request cancelled') {
    super(reason);
  }
}

/**
 * The hub's own stop ended a request still running (`switchyard stdio`: its drain time ran out,
 * or a stop signal came after stdin closed). Unlike a client's cancellation, its client still
 * waits for an answer: it is told, -32603 as a request refused while the hub drains, and its
 * row says `unavailable`, as that one's does (and as a call over HTTP that the closing
 * upstreams fail at the drain deadline).
 */
export class HubStoppingError extends HubError {
  override readonly name = 'HubStoppingError';
  override readonly kind = 'unavailable';
  /** `notSent`: ended before its request left the hub (a CancelledError's notSent, which this one stands for). */
  constructor(readonly notSent = false) {
    super('the hub is shutting down: the request was still running when it stopped, and was ended (it may have been carried out in part); send it again once the hub is back');
  }
}

/**
 * `e`, marked as raised before its request left the hub (it waited for a slot, or for a retry):
 * an idempotency key it held is freed, not kept as "outcome unknown".
 */
export function notSent<E extends CancelledError | TimeoutError>(e: E): E {
  e.notSent = true;
  return e;
}
/** The connection to the upstream broke: process exit, socket error, bad HTTP status. */
export class TransportError extends HubError {
  override readonly name = 'TransportError';
  override readonly kind = 'transport';
  /** How long the server asked the hub to wait before another request (its Retry-After), in ms. */
  retryAfterMs?: number;
  /** An HTTP 5xx whose body was the server's own JSON-RPC error: the server answered (no proxy in its place). */
  rpcBody?: boolean;
  /**
   * The server refused the request's own POST before applying it, so an idempotency key it held
   * is free: 401 or 403 (RFC 9110 §15.5.2, §15.5.4), which the same credential meets again; or
   * 429 (RFC 6585 §4: too many requests), or 503 with a Retry-After (§15.6.4: unable to handle
   * it now, come back then), which the hub may send again once the wait is over, a write too
   * (retry.ts). Not `notDelivered`: the server was reached and answered (a health check's 503 is
   * a server failing, not one that cannot be reached). A resumed stream's 401 is not this.
   */
  refused?: boolean;
  /**
   * The answer was past the hub's limit of one message (maxFrameBytes): the server answered, and
   * the same request would meet the limit again. Neither sent again nor counted against the server.
   */
  oversized?: boolean;
  constructor(
    message: string,
    readonly status?: number,
    /** true when the hub knows the upstream never saw the request (safe to retry). */
    readonly notDelivered = false,
  ) {
    super(message);
  }
}

/** An upstream's 401, 403, 429 or 503 + Retry-After to the request's own POST (TransportError.refused): delivered, not applied. */
export function refusedUnapplied(err: unknown): boolean {
  return err instanceof TransportError && err.refused === true;
}
