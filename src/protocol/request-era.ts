/**
 * The era a request is served in, as the downstream edge tells the eras (digest §2.4,
 * downstream/classify.ts): what a row records of a request refused before the edge read it
 * further (the rate limit, tool scopes, a body never read), so that it names the era the hub
 * would have answered it in, not a guess of its own.
 */
import { LEGACY, LEGACY_VERSIONS, MODERN, MODERN_VERSIONS, type Era } from './era.js';
import { isObj } from './jsonrpc.js';
import { META_PROTOCOL_VERSION } from './meta.js';

const legacy = new Set<string>(LEGACY_VERSIONS);
const modern = new Set<string>(MODERN_VERSIONS);
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/**
 * A version that is not one of the legacy ones reads as a modern claim (digest §2.4) if it is
 * one we serve or a later date; anything else is no version at all (a legacy request with it
 * is refused as unsupported).
 */
export function looksModern(v: string | undefined): boolean {
  return v !== undefined && !legacy.has(v) && (modern.has(v) || (DATE.test(v) && v > '2025-11-25'));
}

/**
 * The era whose rules answer a request (or a message with no method: `method` undefined), from
 * its body's `_meta` version claim and its MCP-Protocol-Version header: 2026-07-28 for one with
 * a claim (an initialize only with a modern one) or a modern header (a request the endpoint
 * refuses for its header is refused by that era's rules: -32602, -32020, -32022), 2025-11-25
 * otherwise. classifyEra's verdict, its `modern` and `invalid` alike.
 */
export function eraOfRequest(method: string | undefined, params: unknown, headerVersion: string | undefined): Era {
  if (looksModern(headerVersion)) return MODERN;
  const meta = isObj(params) ? params._meta : undefined;
  const claim = isObj(meta) ? meta[META_PROTOCOL_VERSION] : undefined;
  if (method === 'initialize') return typeof claim === 'string' && looksModern(claim) ? MODERN : LEGACY;
  return claim !== undefined ? MODERN : LEGACY;
}
