/**
 * A resource URI in the form its other spellings share: escapes of unreserved characters
 * decoded (`%73` is `s`; RFC 3986 §6.2.2), again while that reveals more (a double-encoded
 * `%2573` stays, `%%373` becomes `s` in two passes), the remaining escapes' hex in upper case,
 * then the WHATWG URL parser's form (scheme in lower case, `.` and `..` segments resolved, and
 * what that parser also folds: a special scheme's host, tabs and newlines). A URI that does not
 * parse keeps its decoded spelling; one longer than MAX_KEYED is its own key.
 *
 * Why: the hub hides a resource by its URI, and an upstream that normalises URIs would serve
 * `x://dir/%73ecret` or `x://dir/./secret` as the hidden `x://dir/secret` through a template.
 * The keys only ever hide more than an exact match. Spellings they do not cover (`%2F` for a
 * `/`, case-insensitive paths) are caught in the answer: a read answered with contents the
 * hub hides is refused (Router.readResource).
 */
export function uriKey(uri: string): string {
  if (uri.length > MAX_KEYED) return uri;
  let s = uri;
  // Only a decoded character can make a new escape; upper-casing the others cannot.
  for (let pass = 0; pass < MAX_PASSES && s.includes('%'); pass++) {
    decoded = false;
    s = decodeUnreserved(s);
    if (!decoded) break;
  }
  try {
    return new URL(s).href;
  } catch {
    return s;
  }
}

/** Past this, a URI is compared as it is: keying it would cost the event loop too much. */
const MAX_KEYED = 8192;
const MAX_PASSES = 8;
/** Set by decodeUnreserved: it decoded at least one character. */
let decoded = false;

function decodeUnreserved(s: string): string {
  let out = '';
  let from = 0;
  for (let i = s.indexOf('%'); i !== -1 && i + 2 < s.length; i = s.indexOf('%', i + 1)) {
    const hi = hexValue(s.charCodeAt(i + 1));
    const lo = hexValue(s.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) continue;
    const c = hi * 16 + lo;
    const plain = unreserved(c);
    if (plain) decoded = true;
    out += s.slice(from, i) + (plain ? String.fromCharCode(c) : s.slice(i, i + 3).toUpperCase());
    from = i + 3;
    i += 2;
  }
  return from === 0 ? s : out + s.slice(from);
}

function hexValue(c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 32;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
}

/** ALPHA / DIGIT / "-" / "." / "_" / "~" */
function unreserved(c: number): boolean {
  return (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 45 || c === 46 || c === 95 || c === 126;
}
