/**
 * A shallow copy of a JSON object, what `{ ...o }` gives, for a copy that gets fields of its
 * own next (a forwarded request's `name`, a result's `resultType` and `_meta`).
 *
 * Not the spread, on the paths every call takes: with Node 20's V8, objects built by `{ ...o }`
 * and then given more fields (`{ ...o, k: v }` alike) outlived the young generation's
 * collections that the same copies made by Object.assign did not. On tools/call in front of
 * stdio that was 0.2–1.1 MB promoted to the old generation at every scavenge, and in some
 * processes 15–19 % of the hub's thread in pauses (docs/BENCHMARKS.md, the eighteenth round).
 *
 * Object.assign sets fields, and setting `__proto__` changes the copy's prototype instead of
 * copying the field. A JSON object from a client or an upstream may have an own `__proto__`
 * key, so such an object is copied by the spread, which defines its fields.
 */
export function copyOf<T extends object>(o: T): T {
  return Object.hasOwn(o, '__proto__') ? { ...o } : Object.assign({}, o);
}

/** `o[k] = v`, except that a key `__proto__` becomes a field of `o`, not its prototype. */
export function setField(o: Record<string, unknown>, k: string, v: unknown): void {
  if (k === '__proto__') Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  else o[k] = v;
}
