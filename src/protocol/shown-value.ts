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
