/**
 * A table looked up by a method (or other name) a client or an upstream sent: no prototype, so
 * `toString`, `constructor` or `__proto__` find nothing instead of Object's functions.
 */
export function methodTable<T>(entries: Record<string, T>): Readonly<Record<string, T | undefined>> {
  return Object.assign(Object.create(null) as Record<string, T>, entries);
}
