import { EXCERPT_MARGIN, redactedExcerpt } from '../policy/secret-text.js';

/**
 * A value from a client as an error message quotes it: a string as it came, anything else as
 * its JSON. Not String(): a JSON object with a "toString" (or "valueOf") key of its own that is
 * no function has no primitive to convert to, and String() throws, which failed the request it
 * was quoted for with a 500 and no row. `max`: how much of it is kept (its start).
 */
export function shownValue(v: unknown, max = Infinity): string {
  let s: string;
  if (typeof v === 'string') s = v;
  else {
    try {
      s = JSON.stringify(v) ?? typeof v;
    } catch {
      s = typeof v;
    }
  }
  return s.length > max ? s.slice(0, max) : s;
}

/**
 * How much of a protocol version a client sent the hub echoes (a -32022's message and
 * `data.requested`, a header mismatch's message, the row's client era): a date is 10
 * characters, and a client chose the rest, up to the body or header limits.
 */
export const MAX_VERSION_TEXT = 64;

/**
 * shownValue within `max` characters, a cut marked by an ellipsis (so a reader knows the text
 * goes on), never between the two halves of a surrogate pair. A value that is cut is redacted
 * first (the rules of error text, redactedExcerpt): a credential across the cut left its first
 * part, which neither a rule nor the ledger's and the log's redaction (the shape too short, a
 * URL's password without its "@", a configured value not whole) recognised any more.
 */
export function clippedValue(v: unknown, max: number): string {
  const whole = shownValue(v, max + 1);
  if (whole.length <= max) return whole;
  const s = redactedExcerpt(shownValue(v, max + EXCERPT_MARGIN), max + 1);
  if (s.length <= max) return s;
  let end = max - 1;
  const last = s.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${s.slice(0, end)}…`;
}

/** A protocol version a client sent, as the hub quotes it (MAX_VERSION_TEXT). */
export function shownVersion(v: unknown): string {
  return clippedValue(v, MAX_VERSION_TEXT);
}

/**
 * How much of a method, tool or prompt name, or resource URI, a client sent an error's message
 * quotes ("Unknown tool: …"): as long as any hub name can be (names.mode "spec" allows 128
 * characters), so a name it cuts names nothing. A client chose the rest, up to the body limit: a
 * megabyte name came back whole in the error, and again in its `data.uri`.
 */
export const MAX_NAME_TEXT = 128;

/** A name or URI a client sent, as an error's message quotes it (MAX_NAME_TEXT, the cut marked). */
export function shownName(v: unknown): string {
  return clippedValue(v, MAX_NAME_TEXT);
}

/**
 * How much of a URI a not-found's `data.uri` gives back: the longest URI the hub keeps anywhere
 * (a subscription, a read's cache key), so that any URI a client may use comes back as it sent it.
 */
export const MAX_URI_DATA = 8192;

/** A not-found's `data`: the URI the client asked for, as sent up to MAX_URI_DATA, the cut marked past it. */
export function uriData(uri: unknown): { uri: string } {
  return { uri: clippedValue(uri, MAX_URI_DATA) };
}

/**
 * A request id a client sent, as an error's message quotes it (a string in quotes, a number as
 * it is), cut as a name is (MAX_NAME_TEXT): a client chose its length, and "already in flight"
 * repeated a megabyte id whole.
 */
export function shownId(id: unknown): string {
  return typeof id === 'string' ? JSON.stringify(shownName(id)) : shownName(id);
}
