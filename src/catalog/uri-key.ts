/**
 * A resource URI in the form its other spellings share (RFC 3986 §6.2.2): escapes of
 * unreserved characters decoded (`%73` is `s`), the remaining escapes' hex in upper case, then
 * the WHATWG URL parser's form (scheme in lower case, `.` and `..` segments resolved, a special
 * scheme's host in lower case). A URI that does not parse keeps its decoded spelling.
 *
 * Why: the hub hides a resource by its URI, and an upstream that normalises URIs would serve
 * `x://dir/%73ecret` or `x://dir/./secret` as the hidden `x://dir/secret` through a template.
 * Comparing these keys only ever hides more: spellings RFC 3986 calls equivalent.
 */
export function uriKey(uri: string): string {
  const decoded = uri.includes('%') ? uri.replace(/%[0-9A-Fa-f]{2}/g, unescapeUnreserved) : uri;
  try {
    return new URL(decoded).href;
  } catch {
    return decoded;
  }
}

function unescapeUnreserved(escape: string): string {
  const c = String.fromCharCode(parseInt(escape.slice(1), 16));
  return /[A-Za-z0-9\-._~]/.test(c) ? c : escape.toUpperCase();
}
