/**
 * Globs over hub tool names (`fs__write_*`, `admin__?`): `*` matches any run of characters,
 * `?` exactly one, everything else itself. Names are short (≤ 128), so the translated
 * expression cannot backtrack badly. Used by policy (confirm, scopes, rate limits) and by the
 * catalog's allow/deny lists and groups.
 */
export function globSource(glob: string): string {
  let out = '';
  for (const ch of glob) {
    if (ch === '*') out += '.*';
    else if (ch === '?') out += '.';
    else out += ch.replace(/[.+^${}()|[\]\\/-]/g, '\\$&');
  }
  return out;
}

export function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${globSource(glob)}$`, 's');
}

export type Matcher = (name: string) => boolean;

/** One matcher for a glob list; undefined for an absent list. */
export function globMatcher(globs: readonly string[] | undefined): Matcher | undefined {
  if (!globs) return undefined;
  if (globs.length === 0) return () => false;
  const re = new RegExp(`^(?:${globs.map(globSource).join('|')})$`, 's');
  return (name) => re.test(name);
}

/** A compiled glob → value table; `matches(name)` lists the values of every glob that matches, in table order. */
export class GlobTable<T> {
  private readonly rows: { re: RegExp; value: T }[];

  constructor(table: Record<string, T> = {}) {
    this.rows = Object.entries(table).map(([glob, value]) => ({ re: globToRegExp(glob), value }));
  }

  get size(): number {
    return this.rows.length;
  }

  matches(name: string): T[] {
    const out: T[] = [];
    for (const r of this.rows) if (r.re.test(name)) out.push(r.value);
    return out;
  }

  first(name: string): T | undefined {
    for (const r of this.rows) if (r.re.test(name)) return r.value;
    return undefined;
  }
}
