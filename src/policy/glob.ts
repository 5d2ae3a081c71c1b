/**
 * Globs over hub tool names (`fs__write_*`, `admin__?`): `*` matches any run of characters,
 * `?` exactly one, everything else itself. Names are short (≤ 128), so the translated
 * expression cannot backtrack badly.
 */
export function globToRegExp(glob: string): RegExp {
  let src = '';
  for (const ch of glob) {
    if (ch === '*') src += '.*';
    else if (ch === '?') src += '.';
    else src += ch.replace(/[\\^$.|+(){}[\]]/g, '\\$&');
  }
  return new RegExp(`^${src}$`, 's');
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
