/**
 * JSON.stringify(s)'s text: a string with nothing to escape (no control character, quote,
 * backslash or surrogate) is quoted as it is, without the call into V8's serialiser (whose
 * set-up alone is ~1.3k instructions a call; callgrind, issue #9).
 */
export function jsonText(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return JSON.stringify(s);
  }
  return '"' + s + '"';
}

/** A frozen plain object of text, numbers, booleans and nulls: its JSON is fixed for good. */
export function plainFrozen(o: object): boolean {
  if (!Object.isFrozen(o) || Object.getPrototypeOf(o) !== Object.prototype) return false;
  for (const k of Object.keys(o)) {
    const v = (o as Record<string, unknown>)[k];
    if (v !== null && typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') return false;
  }
  return true;
}
