/**
 * Header-safe values for Mcp-Name and Mcp-Param-* (digest §3.4, §6.3): plain visible ASCII
 * (space and tab allowed inside) passes unchanged; anything else — non-ASCII, control
 * characters, edge whitespace, empty, or something that already looks like the sentinel — is
 * sent as `=?base64?<b64 of UTF-8>?=`. And the first value of a header node:http hands over.
 */
const PREFIX = '=?base64?';
const SUFFIX = '?=';
const B64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function encodeHeaderValue(v: string): string {
  let plain = v.length > 0 && v === v.trim() && !(v.startsWith(PREFIX) && v.endsWith(SUFFIX));
  for (let i = 0; plain && i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (!(c === 9 || (c >= 0x20 && c <= 0x7e))) plain = false;
  }
  return plain ? v : PREFIX + Buffer.from(v, 'utf8').toString('base64') + SUFFIX;
}

/**
 * A header value as the client meant it: the sentinel form must be strict Base64 of UTF-8;
 * anything not wrapped in both `=?base64?` and `?=` is literal. Null when the sentinel is malformed.
 */
export function decodeHeaderValue(raw: string): string | null {
  if (!raw.startsWith(PREFIX) || !raw.endsWith(SUFFIX) || raw.length < PREFIX.length + SUFFIX.length) return raw;
  const b64 = raw.slice(PREFIX.length, raw.length - SUFFIX.length);
  if (!B64.test(b64)) return null;
  const text = Buffer.from(b64, 'base64').toString('utf8');
  // Bytes that are not UTF-8 come back with replacement characters and no longer round-trip.
  return Buffer.from(text, 'utf8').toString('base64') === b64 ? text : null;
}

/**
 * The first value of a header as node:http gives it: a string, or a list for a field it keeps
 * every line of (set-cookie, or a header object built by hand); undefined when absent.
 */
export function firstHeaderValue(v: string | readonly string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : (v as string | undefined);
}

/** Whether `v` can be a header's value as it is: visible ASCII, spaces and tabs inside, none at its ends (HTTP drops them). */
export function plainHeaderValue(v: string): boolean {
  return /^[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?$/.test(v);
}
