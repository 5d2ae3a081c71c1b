import { createHash } from 'node:crypto';

/**
 * Hub names for upstream tools and prompts: `<prefix>__<name>`, kept within what model
 * providers accept, collision-free across servers, and stable: a name that fits passes
 * unchanged, and a name never changes because another server came or went (given a store).
 */

/** 'strict' fits Anthropic/OpenAI tool names; 'spec' is what MCP itself allows. */
export type NameMode = 'strict' | 'spec';
export type NameKind = 'tool' | 'prompt';
/** 'reserved': the name would have lain in another server's `<prefix>__` space (below). */
export type RenameReason = 'sanitized' | 'too-long' | 'collision' | 'reserved';

export const NAME_RULES: Record<NameMode, { max: number; valid: RegExp; char: RegExp }> = {
  strict: { max: 64, valid: /^[A-Za-z0-9_-]{1,64}$/, char: /^[A-Za-z0-9_-]$/ },
  spec: { max: 128, valid: /^[A-Za-z0-9_.-]{1,128}$/, char: /^[A-Za-z0-9_.-]$/ },
};

/** Separator between prefix and upstream name. */
export const PREFIX_SEPARATOR = '__';

export function fitsName(name: string, mode: NameMode): boolean {
  return NAME_RULES[mode].valid.test(name);
}

/** The name before any fixing: `<prefix>__<name>`, or the name itself for prefix "". */
export function baseName(prefix: string, upstreamName: string): string {
  return prefix === '' ? upstreamName : `${prefix}${PREFIX_SEPARATOR}${upstreamName}`;
}

/**
 * Whether a hub name ends as every renamed form does (`_` and a 6- or 8-hex hash): only such a
 * name can differ from its base name. Another name may end so too; one that does not is its own base.
 */
export function mayBeRenamed(name: string): boolean {
  return HASHED_END.test(name);
}

const HASHED_END = /_(?:[0-9a-f]{6}|[0-9a-f]{8})$/;

/** Every character (code point, so one emoji is one `_`) outside the mode's set becomes `_`. */
export function sanitizeName(s: string, mode: NameMode): string {
  const ok = NAME_RULES[mode].char;
  let out = '';
  for (const ch of s) out += ok.test(ch) ? ch : '_';
  return out;
}

/**
 * The prefix whose space a hub name lies in: the longest of `prefixes` (non-empty ones) that
 * the name starts with, followed by the separator. Every `<prefix>__…` name belongs to that
 * server, so that policies written for `x__delete` (confirm, groups, scopes, rate limits)
 * always mean server x's tool: a server with prefix "" listing `x__delete` must not take it.
 */
export function spaceOf(name: string, prefixes: ReadonlySet<string>): string | undefined {
  let owner: string | undefined;
  for (let i = name.indexOf(PREFIX_SEPARATOR); i > 0; i = name.indexOf(PREFIX_SEPARATOR, i + 1)) {
    const p = name.slice(0, i);
    if (prefixes.has(p)) owner = p;
  }
  return owner;
}

/** Names that would lie in the space of a prefix other than `own`, given every server's prefix. */
export type Foreign = (name: string, own: string) => boolean;

export function foreignTo(prefixes: Iterable<string>): Foreign {
  const set = new Set([...prefixes].filter((p) => p !== ''));
  return (name, own) => {
    const o = set.size === 0 ? undefined : spaceOf(name, set);
    if (o === undefined || o === own) return false;
    // Its own space, when `own` (not among `prefixes`) is the longer one.
    return !(own.length > o.length && name.startsWith(`${own}${PREFIX_SEPARATOR}`));
  };
}

const NOBODY: Foreign = () => false;

/**
 * Deterministic suffix from the server id and the upstream name (never the prefix or other
 * servers, so it cannot shift when the config around it changes). Attempt 0 is the short
 * form used for sanitized or truncated names; later attempts settle collisions.
 */
export function nameHash(serverId: string, upstreamName: string, attempt = 0): string {
  const input = attempt === 0 ? `${serverId}\0${upstreamName}` : `${serverId}\0${upstreamName}\0${attempt}`;
  return createHash('sha256')
    .update(input)
    .digest('hex')
    .slice(0, attempt === 0 ? 6 : 8);
}

export interface Candidate {
  name: string;
  /** Why it differs from `baseName`; absent when it is the base name unchanged. */
  reason?: RenameReason;
}

/**
 * The hub name to try for one upstream name. Attempt 0: the base name if it fits, else the
 * sanitized base cut to fit plus `_` and a 6-hex hash. Attempt n > 0 (after a collision):
 * sanitized base cut to fit plus `_` and an 8-hex hash of attempt n. A name that would lie in
 * another prefix's space (`foreign`) takes its reserved form instead (`reservedName`).
 */
export function candidateName(
  serverId: string,
  prefix: string,
  upstreamName: string,
  mode: NameMode,
  attempt = 0,
  foreign: Foreign = NOBODY,
): Candidate {
  const c = ordinaryName(serverId, prefix, upstreamName, mode, attempt);
  return foreign(c.name, prefix) ? reservedName(serverId, prefix, upstreamName, mode, attempt) : c;
}

function ordinaryName(serverId: string, prefix: string, upstreamName: string, mode: NameMode, attempt: number): Candidate {
  const base = baseName(prefix, upstreamName);
  if (attempt === 0 && fitsName(base, mode)) return { name: base };
  const clean = sanitizeName(base, mode);
  const hash = nameHash(serverId, upstreamName, attempt);
  const name = `${clean.slice(0, NAME_RULES[mode].max - hash.length - 1)}_${hash}`;
  if (attempt > 0) return { name, reason: 'collision' };
  return { name, reason: clean !== base || base === '' ? 'sanitized' : 'too-long' };
}

/**
 * The form of a name that would lie in another server's space: the upstream name sanitized,
 * every run of `_` made one and none at its ends, after the server's own `<prefix>__`, cut to
 * fit, plus `_` and the hash. With no `__` after its own prefix it lies in no other space,
 * whatever the prefixes (the tail after a prefix that ends or starts with `_` included).
 */
export function reservedName(serverId: string, prefix: string, upstreamName: string, mode: NameMode, attempt = 0): Candidate {
  const head = prefix === '' ? '' : `${prefix}${PREFIX_SEPARATOR}`;
  const hash = nameHash(serverId, upstreamName, attempt);
  const room = Math.max(0, NAME_RULES[mode].max - hash.length - 1 - head.length);
  const tail = sanitizeName(upstreamName, mode).replace(/_{2,}/g, '_').slice(0, room).replace(/^_+|_+$/g, '');
  return { name: tail === '' ? `${head}${hash}` : `${head}${tail}_${hash}`, reason: attempt === 0 ? 'reserved' : 'collision' };
}

/** Remembers assignments across restarts and config changes; the hub backs it with SQLite. */
export interface NameStore {
  get(server: string, kind: NameKind, upstreamName: string): string | undefined;
  put(server: string, kind: NameKind, upstreamName: string, hubName: string): void;
  /** Every hub name stored for a server's names of this kind. */
  held(server: string, kind: NameKind): string[];
  /** Every (server, upstream name) a hub name of this kind is stored for, in no set order. */
  owners(kind: NameKind, hubName: string): Resolved[];
}

/**
 * The stored assignments in memory, indexed both ways: the catalog asks by upstream name while
 * it builds a list, and by hub name when a call names a tool of a server that is down.
 */
export class NameMap {
  private readonly forward = new Map<string, string>();
  private readonly reverse = new Map<string, Resolved[]>();

  get size(): number {
    return this.forward.size;
  }

  get(server: string, kind: NameKind, upstreamName: string): string | undefined {
    return this.forward.get(`${server}\0${kind}\0${upstreamName}`);
  }

  /** false when the name was stored already. */
  put(server: string, kind: NameKind, upstreamName: string, hubName: string): boolean {
    const k = `${server}\0${kind}\0${upstreamName}`;
    const old = this.forward.get(k);
    if (old === hubName) return false;
    this.forward.set(k, hubName);
    if (old !== undefined) {
      const rk = `${kind}\0${old}`;
      const rest = (this.reverse.get(rk) ?? []).filter((o) => o.server !== server || o.upstreamName !== upstreamName);
      if (rest.length) this.reverse.set(rk, rest);
      else this.reverse.delete(rk);
    }
    const rk = `${kind}\0${hubName}`;
    const list = this.reverse.get(rk);
    if (list) list.push({ server, upstreamName });
    else this.reverse.set(rk, [{ server, upstreamName }]);
    return true;
  }

  held(server: string, kind: NameKind): string[] {
    return heldIn(this.forward, server, kind);
  }

  owners(kind: NameKind, hubName: string): Resolved[] {
    return [...(this.reverse.get(`${kind}\0${hubName}`) ?? [])];
  }
}

export class MemoryNameStore implements NameStore {
  private readonly map = new NameMap();
  get(server: string, kind: NameKind, upstreamName: string): string | undefined {
    return this.map.get(server, kind, upstreamName);
  }
  put(server: string, kind: NameKind, upstreamName: string, hubName: string): void {
    this.map.put(server, kind, upstreamName, hubName);
  }
  held(server: string, kind: NameKind): string[] {
    return this.map.held(server, kind);
  }
  owners(kind: NameKind, hubName: string): Resolved[] {
    return this.map.owners(kind, hubName);
  }
}

/** The values of a `server\0kind\0name`-keyed map that belong to server and kind. */
export function heldIn(map: ReadonlyMap<string, string>, server: string, kind: NameKind): string[] {
  const prefix = `${server}\0${kind}\0`;
  const out: string[] = [];
  for (const [k, v] of map) if (k.startsWith(prefix)) out.push(v);
  return out;
}

/** A configured server, as far as naming goes. */
export interface ServerPrefix {
  id: string;
  prefix: string;
}

export interface ServerNames extends ServerPrefix {
  /** Upstream names in the upstream's order (duplicates after the first are ignored). */
  names: readonly string[];
}

export interface Renaming {
  server: string;
  kind: NameKind;
  upstreamName: string;
  hubName: string;
  reason: RenameReason;
}

export interface Assignment {
  /** server id → upstream name → hub name, for every name given. */
  names: Map<string, Map<string, string>>;
  /** Every name that differs from its base name, with why (for logs and `switchyard tools`). */
  renamed: Renaming[];
}

export interface Resolved {
  server: string;
  upstreamName: string;
}

// A stored name is honoured only if it is still one this server/prefix/mode could have been
// given; otherwise (prefix or mode changed) the name is assigned afresh.
const MAX_STORED_ATTEMPT = 16;

export class NameAssigner {
  readonly mode: NameMode;
  private readonly store: NameStore;
  private readonly reverse = new Map<NameKind, Map<string, Resolved>>();

  constructor(options: { mode?: NameMode; store?: NameStore } = {}) {
    this.mode = options.mode ?? 'strict';
    this.store = options.store ?? new MemoryNameStore();
  }

  /**
   * Names every upstream name of `servers` (given in config order). Stored assignments win
   * first; new names take their candidate, and on a collision the later one (config order,
   * then upstream order) takes further attempts until unique. New assignments are stored.
   * `configured`: every configured server (default: `servers`). Their prefixes own their
   * `<prefix>__` spaces (`spaceOf`); those not in this listing (down, starting, failing to
   * list) are absent: no new name is given that is stored for one of them, so none is taken
   * while they are away.
   */
  assign(kind: NameKind, servers: readonly ServerNames[], configured: readonly ServerPrefix[] = servers): Assignment {
    const foreign = foreignTo([...servers, ...configured].map((s) => s.prefix));
    const taken = new Map<string, Resolved>();
    const present = new Set(servers.map((s) => s.id));
    const reserved = new Set<string>();
    for (const c of configured) {
      if (present.has(c.id)) continue;
      // A name an absent server took in another's space (an older build gave such names) is not kept for it.
      for (const n of this.store.held(c.id, kind)) if (!foreign(n, c.prefix)) reserved.add(n);
    }
    const byId = new Map([...configured, ...servers].map((s) => [s.id, s]));
    const names = new Map<string, Map<string, string>>();
    const reasons = new Map<string, RenameReason>(); // by hub name
    const pending: { s: ServerNames; upstreamName: string }[] = [];

    for (const s of servers) {
      const mine = new Map<string, string>();
      names.set(s.id, mine);
      const seen = new Set<string>();
      for (const upstreamName of s.names) {
        if (seen.has(upstreamName)) continue;
        seen.add(upstreamName);
        let stored = this.store.get(s.id, kind, upstreamName);
        // A reservation only keeps new assignments off an absent server's names: a name stored
        // for this server is its own (the absent one may have dropped that tool long ago).
        let reason = stored === undefined || taken.has(stored) ? null : this.storedReason(s, upstreamName, stored, foreign);
        if (reason === 'collision') {
          // Its first choice went to a server that took it in this one's space: it is this one's again.
          const first = candidateName(s.id, s.prefix, upstreamName, this.mode, 0, foreign);
          const holders = this.store.owners(kind, first.name);
          const squatted = holders.length > 0 && holders.every((o) => o.server !== s.id && byId.has(o.server) && foreign(first.name, byId.get(o.server)!.prefix));
          if (squatted && !taken.has(first.name) && !reserved.has(first.name)) {
            stored = first.name;
            reason = first.reason;
            this.store.put(s.id, kind, upstreamName, stored);
          }
        }
        if (reason === null) {
          pending.push({ s, upstreamName });
          continue;
        }
        mine.set(upstreamName, stored!);
        taken.set(stored!, { server: s.id, upstreamName });
        if (reason) reasons.set(stored!, reason);
      }
    }

    for (const { s, upstreamName } of pending) {
      let c = candidateName(s.id, s.prefix, upstreamName, this.mode, 0, foreign);
      for (let attempt = 1; taken.has(c.name) || reserved.has(c.name); attempt++) {
        c = candidateName(s.id, s.prefix, upstreamName, this.mode, attempt, foreign);
      }
      names.get(s.id)!.set(upstreamName, c.name);
      taken.set(c.name, { server: s.id, upstreamName });
      if (c.reason) reasons.set(c.name, c.reason);
      this.store.put(s.id, kind, upstreamName, c.name);
    }

    this.reverse.set(kind, taken);
    const renamed: Renaming[] = [];
    for (const s of servers) {
      for (const [upstreamName, hubName] of names.get(s.id)!) {
        const reason = reasons.get(hubName);
        if (reason) renamed.push({ server: s.id, kind, upstreamName, hubName, reason });
      }
    }
    return { names, renamed };
  }

  /** The upstream behind a hub name, per the latest `assign` of that kind. */
  resolve(kind: NameKind, hubName: string): Resolved | undefined {
    return this.reverse.get(kind)?.get(hubName);
  }

  /**
   * The servers among `servers` (every configured one) a hub name is stored for, where it is
   * still a name that server could have been given under its prefix and this mode: for a call
   * that names a tool of a server that is down, which no list of this process has shown.
   */
  storedOwners(kind: NameKind, hubName: string, servers: readonly ServerPrefix[]): Resolved[] {
    const foreign = foreignTo(servers.map((s) => s.prefix));
    return this.store.owners(kind, hubName).filter((o) => {
      const s = servers.find((x) => x.id === o.server);
      return s !== undefined && this.storedReason(s, o.upstreamName, hubName, foreign) !== null;
    });
  }

  /**
   * The one (server, upstream name) that `assign` can give this hub name to, whatever the other
   * servers list, when that is known without their lists; undefined when only the whole listing
   * can tell (the caller then assigns it). `servers`: every configured one. Either
   * - the name is stored, still validly, for one upstream name of one server only: `assign`
   *   honours stored names before it gives any new one, and no other server's name is taken
   *   first (a stored name of another, or a reclaimed first choice, would be a second owner, or
   *   lie in the other's space: see `assign`); or
   * - it is stored for nobody, lies in the `<prefix>__` space of exactly one server, and is that
   *   server's base name for an upstream name that has no stored name of its own: names in a
   *   server's space are given to that server alone (another's candidate there is foreign, so
   *   reserved), and within it the base name is one upstream name's only. Not a name that ends
   *   as a hashed form does (`_` and 6 or 8 hex digits): another upstream name's renamed form
   *   could be the same.
   * The name is that upstream name's only if the server lists it and allow/deny passes it: a
   * name its server does not list may go to a name new to another.
   */
  soleOwner(kind: NameKind, hubName: string, servers: readonly ServerPrefix[]): Resolved | undefined {
    const stored = this.storedOwners(kind, hubName, servers);
    if (stored.length > 0) return stored.length === 1 ? stored[0] : undefined;
    if (!fitsName(hubName, this.mode) || mayBeRenamed(hubName)) return undefined;
    const space = spaceOf(hubName, new Set(servers.map((s) => s.prefix).filter((p) => p !== '')));
    const holders = space === undefined ? [] : servers.filter((s) => s.prefix === space);
    if (holders.length !== 1) return undefined;
    const upstreamName = hubName.slice(space!.length + PREFIX_SEPARATOR.length);
    const s = holders[0];
    if (upstreamName === '' || baseName(s.prefix, upstreamName) !== hubName || this.store.get(s.id, kind, upstreamName) !== undefined) return undefined;
    return { server: s.id, upstreamName };
  }

  /**
   * undefined: stored name is the base name; a reason: a valid renamed form; null: stale (its
   * prefix or the mode changed, or it lies in another server's space). A reserved form stays
   * valid when the server whose space it kept out of is gone, so that no name changes for that.
   */
  private storedReason(s: ServerPrefix, upstreamName: string, stored: string, foreign: Foreign): RenameReason | undefined | null {
    if (!fitsName(stored, this.mode) || foreign(stored, s.prefix)) return null;
    for (let attempt = 0; attempt <= MAX_STORED_ATTEMPT; attempt++) {
      const c = ordinaryName(s.id, s.prefix, upstreamName, this.mode, attempt);
      if (c.name === stored) return c.reason;
      const r = reservedName(s.id, s.prefix, upstreamName, this.mode, attempt);
      if (r.name === stored) return r.reason;
    }
    return null;
  }
}
