import { LEGACY_VERSIONS, MODERN_VERSIONS } from '../protocol/era.js';
import { HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, RpcError } from '../protocol/errors.js';
import { META_PROTOCOL_VERSION } from '../protocol/meta.js';
import { shownVersion } from '../protocol/shown-value.js';
import { looksModern } from '../protocol/request-era.js';
import { unsupportedVersion } from './modern-envelope.js';

export type EraVerdict = { era: 'modern'; version: unknown } | { era: 'legacy' } | { era: 'invalid'; error: RpcError; status: number };

export { looksModern };

const modern = new Set<string>(MODERN_VERSIONS);

/**
 * Which era one incoming message belongs to, from its body claim and the version header.
 * Mirrors the dual-era classification of digest §2.4. Its `modern` and `invalid` verdicts are
 * the 2026-07-28 era's (eraOfRequest, which rows of requests refused before it say).
 */
export function classifyEra(
  method: string | undefined,
  params: Record<string, unknown> | undefined,
  headerVersion: string | undefined,
  /** The message is a notification: its `_meta` is optional in 2026-07-28 (NotificationParams), so a modern header alone says its era. */
  notification = false,
): EraVerdict {
  const meta = params?._meta as Record<string, unknown> | undefined;
  const claim = meta?.[META_PROTOCOL_VERSION];
  if (method === 'initialize') {
    // A modern claim makes it a modern request for a method that era removed: 404 + -32601.
    if (typeof claim === 'string' && looksModern(claim)) return { era: 'modern', version: claim };
    if (looksModern(headerVersion))
      return { era: 'invalid', status: 400, error: new RpcError(HEADER_MISMATCH, `initialize is a legacy request but MCP-Protocol-Version says ${headerVersion}`) };
    return { era: 'legacy' };
  }
  if (claim !== undefined) return { era: 'modern', version: claim };
  // A response (no method) in a modern exchange answers nothing: that era's servers ask no
  // questions (they return input_required), so a client of it sends requests and notifications only.
  if (method === undefined && looksModern(headerVersion))
    return { era: 'invalid', status: 400, error: new RpcError(INVALID_REQUEST, `a ${headerVersion} client sends no responses: the hub asks for input with input_required results`) };
  if (notification && looksModern(headerVersion)) return { era: 'modern', version: headerVersion };
  // A later version than any the hub serves: what it needs of a request the hub cannot know, so
  // it is told the versions it can use (-32022, digest §2.2), as one claiming it in `_meta` is,
  // not that it lacks this era's keys. Its row names that version (refusalFacts).
  if (looksModern(headerVersion) && !modern.has(headerVersion!)) return { era: 'invalid', ...unsupportedVersion(headerVersion) };
  if (looksModern(headerVersion))
    return {
      era: 'invalid',
      status: 400,
      error: new RpcError(INVALID_PARAMS, `missing required _meta keys: ${META_PROTOCOL_VERSION}, io.modelcontextprotocol/clientCapabilities`),
    };
  return { era: 'legacy' };
}

/**
 * A legacy request's MCP-Protocol-Version header that names no version the hub speaks (digest
 * §6.2: 400). Absent is fine: the client may predate the header (2025-03-26).
 */
export function unsupportedLegacyVersion(header: string | undefined): RpcError | null {
  if (header === undefined || (LEGACY_VERSIONS as readonly string[]).includes(header)) return null;
  return new RpcError(INVALID_REQUEST, `Bad Request: unsupported MCP-Protocol-Version ${JSON.stringify(shownVersion(header))} (supported: ${LEGACY_VERSIONS.join(', ')}, ${MODERN_VERSIONS.join(', ')})`);
}
