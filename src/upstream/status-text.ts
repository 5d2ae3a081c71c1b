/**
 * A bare HTTP status from an upstream (no JSON-RPC answer in its body), in words a user can act
 * on: a 429 says that the upstream is rate-limiting the hub, and a Retry-After (RFC 9110 §10.2.3,
 * on a 429 or a 503) how long it asks the hub to wait.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { TransportError } from '../protocol/errors.js';
import { firstHeaderValue } from '../protocol/header-value.js';

/** Retry-After in whole seconds from `now`: delay-seconds or an HTTP-date; undefined if absent or unreadable. */
export function retryAfterSeconds(headers: IncomingHttpHeaders, now = Date.now()): number | undefined {
  const text = firstHeaderValue(headers['retry-after'])?.trim();
  if (!text) return undefined;
  if (/^\d+$/.test(text)) return Number(text);
  // An HTTP-date names its day and month (Date.parse would read '-5' as a year).
  const at = /[a-z]/i.test(text) ? Date.parse(text) : NaN;
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000));
}

export function statusText(status: number, headers: IncomingHttpHeaders, now = Date.now()): string {
  const wait = status === 429 || status === 503 ? retryAfterSeconds(headers, now) : undefined;
  const asks = wait === undefined ? '' : `; it asks to wait ${wait} s (Retry-After)`;
  if (status === 429) return `HTTP 429: the upstream is rate-limiting the hub${asks}`;
  // Node's servers refuse more than 16 KiB of headers: a 2026-07-28 request repeats its resource
  // URI or tool name (Mcp-Name) and its x-mcp-header arguments (Mcp-Param-*) there, so a long
  // data: URI is refused so, bare.
  if (status === 431)
    return 'HTTP 431: the upstream refused the request\'s headers as too large (a 2026-07-28 request repeats its tool name or resource URI in Mcp-Name, and x-mcp-header arguments in Mcp-Param-*)';
  return `HTTP ${status}${asks}`;
}

/** The failure of a bare `status`: its words, and the wait its Retry-After asks for (retries keep to it). */
export function statusError(status: number, headers: IncomingHttpHeaders, message = statusText(status, headers)): TransportError {
  const err = new TransportError(message, status);
  const wait = status === 429 || status === 503 ? retryAfterSeconds(headers) : undefined;
  if (wait !== undefined) err.retryAfterMs = wait * 1000;
  return err;
}
