/**
 * Header-safe values for Mcp-Name / Mcp-Param-* (digest §3.4, §6.3): plain visible ASCII
 * without surrounding whitespace goes as is; anything else as `=?base64?<utf-8 base64>?=`.
 */
const SENTINEL = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;
const PLAIN = /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/;

export function encodeHeaderValue(v: string): string {
  if (PLAIN.test(v) && !v.startsWith('=?base64?')) return v;
  return `=?base64?${Buffer.from(v, 'utf8').toString('base64')}?=`;
}

/** The decoded value, or null for a malformed sentinel. */
export function decodeHeaderValue(h: string): string | null {
  if (!h.startsWith('=?base64?')) return h;
  const m = SENTINEL.exec(h);
  if (!m) return null;
  return Buffer.from(m[1], 'base64').toString('utf8');
}
