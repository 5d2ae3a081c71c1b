/**
 * The headers that say what a request to a Streamable HTTP server is. Modern: the version and
 * the routing headers a server or gateway reads before the body (digest §3.4); legacy: the
 * version the session agreed on and the session's id (digest §6.2). Pure, so that a request's
 * headers can be checked without a server.
 */
import { LEGACY, LEGACY_VERSIONS, MODERN } from '../protocol/era.js';
import { mcpNameFor } from './envelope.js';
import type { ParamHeaderIndex } from './param-headers.js';

/**
 * A modern request's headers: built for each request (every tools/call is one), since the
 * `Mcp-Name` and mirrored `Mcp-Param-*` headers are its own.
 */
export function modernRequestHeaders(method: string, params: Record<string, unknown>, paramHeaders: ParamHeaderIndex): Record<string, string> {
  const headers: Record<string, string> = { 'mcp-protocol-version': MODERN, 'mcp-method': method };
  const name = mcpNameFor(method, params);
  if (name !== undefined) headers['mcp-name'] = name;
  if (method === 'tools/call') paramHeaders.apply(params, headers);
  return headers;
}

/** The version a legacy session speaks: the one `initialize` answered with, if the hub speaks it (else adopt refuses the session). */
export function legacySessionVersion(said: unknown): string {
  return typeof said === 'string' && (LEGACY_VERSIONS as readonly string[]).includes(said) ? said : LEGACY;
}

/**
 * The headers of every legacy request on a session after `initialize` (`session` undefined: a
 * server that made none). The current session's are built once and reused for each of its requests.
 */
export function legacySessionHeaders(version: string, session: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'mcp-protocol-version': version };
  if (session !== undefined) headers['mcp-session-id'] = session;
  return headers;
}
