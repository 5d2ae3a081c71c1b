import { GlobTable, type OtherNames } from './glob.js';

/**
 * Which OAuth scopes a tool needs (`auth.oauth.toolScopes`: glob → scope or scopes). Every
 * matching glob adds its scopes, so one challenge can name all of them (digest §7).
 */
export class ToolScopes {
  private readonly table: GlobTable<string[]>;
  private readonly every: string[];

  constructor(toolScopes: Record<string, string | string[]> = {}) {
    // fromEntries: a glob "__proto__" stays a key (assigned, it set the prototype, and the tool
    // so named needed no scope).
    // A string is a `scope` as OAuth writes one, space-separated (the config allows single
    // spaces): "files write" is two scopes. Taken as one, no token could ever hold it (a token's
    // scope splits the same way), and the challenge naming it sent the client round again and again.
    const norm: Record<string, string[]> = Object.fromEntries(Object.entries(toolScopes).map(([glob, s]) => [glob, Array.isArray(s) ? s : s.split(' ')]));
    this.table = new GlobTable(norm);
    this.every = [...new Set(Object.values(norm).flat())];
  }

  /** Whether any tool needs a scope (else no name needs looking at). */
  get size(): number {
    return this.table.size;
  }

  /** Whether some glob meets upstream names (GlobTable.readsUpstream). */
  get readsUpstream(): boolean {
    return this.table.readsUpstream;
  }

  /** Whether the upstream name of the tool called `hubName` could add a scope (GlobTable.readsUpstreamOf). */
  readsUpstreamOf(hubName: string): boolean {
    return this.table.readsUpstreamOf(hubName);
  }

  /**
   * Scopes required to call `hubName` (deduplicated, in config order). `other`: its upstream name
   * and its name before the hub renamed it (names.ts baseName), which the globs meet too, as a
   * group's deny and `policy.confirm` do: `x_delete_<hash>` needs what `*__delete` asks of its
   * siblings, and `github__delete_repo` what `delete_*` asks.
   */
  required(hubName: string, other?: OtherNames): string[] {
    // No toolScopes (most hubs): asked on every tools/call, where the globs' empty match, its
    // flat() and its Set cost ~1k instructions a call (docs/BENCHMARKS.md, seventieth session).
    if (this.table.size === 0) return [];
    return [...new Set(this.table.matches(hubName, other).flat())];
  }

  /** Every scope any tool may need, for `scopes_supported`. */
  all(): string[] {
    return [...this.every];
  }
}

/** The required scopes the token lacks. */
export function missingScopes(granted: ReadonlySet<string> | readonly string[], required: readonly string[]): string[] {
  const have = granted instanceof Set ? granted : new Set(granted as readonly string[]);
  return required.filter((s) => !have.has(s));
}
