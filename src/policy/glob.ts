/**
 * Globs over tool names (`fs__write_*`, `admin__?`): `*` matches any run of characters, `?`
 * exactly one (a UTF-16 code unit), everything else itself. Used by policy (confirm, scopes,
 * rate limits), by the catalog's allow/deny lists and groups, and by `doctor`.
 *
 * Not a regular expression: the name is often the client's own `params.name`, of any length,
 * or an upstream's, and a glob with a few stars translated to `.*` backtracks polynomially
 * (`*_*_*_*_*_x` took 2.4 s over 128 underscores, 7 stars never ended). Here the text between
 * stars is found leftmost, in order, each at most once: O(name × glob) at worst.
 */
export type Matcher = (name: string) => boolean;

/** The separator of a hub name's server prefix (catalog/names.ts PREFIX_SEPARATOR). */
const SEPARATOR = '__';

/**
 * Whether a glob of tool names also meets a tool's upstream name, as a group's lists read them
 * (catalog/filters.ts itemMatcher): one without the separator (`delete_*`) does; one with it
 * (`x__*`, `*__delete`) meets hub names alone, since `x__…` names are server x's, and another
 * server's own tool called `x__delete` must not pass for one of them.
 */
export function meetsUpstream(glob: string): boolean {
  return !glob.includes(SEPARATOR);
}

/** A tool's names other than the one it is called by: its upstream name, and its name before the hub renamed it. */
export interface OtherNames {
  /** Its name before the hub renamed it (names.ts baseName), when it was renamed. */
  base?: string;
  upstream?: string;
}

/** `part` read at `at` in `name`, `?` matching any one unit. */
function fitsAt(part: string, name: string, at: number): boolean {
  for (let i = 0; i < part.length; i++) {
    const c = part.charCodeAt(i);
    if (c !== 0x3f /* ? */ && c !== name.charCodeAt(at + i)) return false;
  }
  return true;
}

/** The first place at or after `from` where `part` fits and ends by `end`; -1 for none. */
function findFrom(part: string, name: string, from: number, end: number): number {
  for (let at = from; at + part.length <= end; at++) if (fitsAt(part, name, at)) return at;
  return -1;
}

/**
 * One glob as a matcher. Leftmost is enough for the middle parts: a later place for one part
 * only leaves less room for the rest, so if any placement fits, the leftmost one does.
 */
export function compileGlob(glob: string): Matcher {
  const parts = glob.split('*');
  if (parts.length === 1) return (name) => name.length === glob.length && fitsAt(glob, name, 0);
  const head = parts[0];
  const tail = parts[parts.length - 1];
  const middle = parts.slice(1, -1).filter((p) => p !== '');
  return (name) => {
    const end = name.length - tail.length;
    if (end < head.length || !fitsAt(head, name, 0) || !fitsAt(tail, name, end)) return false;
    let at = head.length;
    for (const part of middle) {
      const found = findFrom(part, name, at, end);
      if (found < 0) return false;
      at = found + part.length;
    }
    return true;
  };
}

/** One matcher for a glob list (any of them); undefined for an absent list. */
export function globMatcher(globs: readonly string[] | undefined): Matcher | undefined {
  if (!globs) return undefined;
  const each = globs.map(compileGlob);
  return (name) => each.some((m) => m(name));
}

/**
 * A compiled glob → value table; `matches(name)` lists the values of every glob that matches, in
 * table order. Each glob meets the hub name and a renamed tool's base name; one without the
 * separator the upstream name too (meetsUpstream).
 */
export class GlobTable<T> {
  private readonly rows: { test: Matcher; value: T; upstream: boolean }[];
  /** Whether some glob meets upstream names (then a call's upstream name may be worth looking up: readsUpstreamOf). */
  readonly readsUpstream: boolean;
  /** The globs that meet upstream names, but those only of stars (`*`), which match any name. */
  private readonly upstreamTests: Matcher[];

  constructor(table: Record<string, T> = {}) {
    this.rows = Object.entries(table).map(([glob, value]) => ({ test: compileGlob(glob), value, upstream: meetsUpstream(glob) }));
    this.readsUpstream = this.rows.some((r) => r.upstream);
    this.upstreamTests = Object.keys(table)
      .filter((g) => meetsUpstream(g) && !/^\*+$/.test(g))
      .map(compileGlob);
  }

  /**
   * Whether the upstream name of the tool called `name` could change what the table gives for
   * it: only if some glob that meets upstream names misses `name` itself (one that matches it
   * gives its value already, and a glob with `__` never meets upstream names). A bare `*` matches
   * every hub name, so with it alone no call's upstream name is looked up (a lookup per call).
   */
  readsUpstreamOf(name: string): boolean {
    const tests = this.upstreamTests;
    for (let i = 0; i < tests.length; i++) if (!tests[i]!(name)) return true;
    return false;
  }

  get size(): number {
    return this.rows.length;
  }

  /** `other`: the same tool's other names; a row matching several counts once. */
  matches(name: string, other?: OtherNames): T[] {
    const out: T[] = [];
    for (const r of this.rows) if (meets(r, name, other)) out.push(r.value);
    return out;
  }

  first(name: string, other?: OtherNames): T | undefined {
    for (const r of this.rows) if (meets(r, name, other)) return r.value;
    return undefined;
  }
}

function meets(r: { test: Matcher; upstream: boolean }, name: string, other: OtherNames | undefined): boolean {
  if (r.test(name)) return true;
  if (other === undefined) return false;
  return (other.base !== undefined && r.test(other.base)) || (r.upstream && other.upstream !== undefined && other.upstream !== name && r.test(other.upstream));
}
