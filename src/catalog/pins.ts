import { canonicalJson, sha256Hex } from '../ledger/canonical.js';
import type { ListKind } from './lists.js';

/**
 * Pinned definitions (rug-pull defence) of tools, prompts, resources and resource templates.
 * The first definition of an item a server lists is trusted on first use and pinned by a
 * canonical hash; a later list that changes it, or (tools, prompts) that shows an approved
 * definition under a new name, quarantines the item until an operator approves the change
 * (`switchyard tools approve`). One store per kind: their names are separate spaces.
 */

/** A kind pinned in `item_pins` (migration 0014); tools have `tool_pins`. */
export type ItemPinKind = Exclude<ListKind, 'tools'>;

/**
 * What is pinned of each kind: what a model reads and what the hub acts on. The first field is
 * the item's key in its list. Not pinned: `icons` (screened instead, src/catalog/icons.ts),
 * `_meta`, a tool's `execution` and fields the protocol does not have (passed on as they are,
 * their text screened: docs/CATALOG.md "_meta of listed items"), a
 * resource's `size` and `annotations` (they change with its content, which is not pinned).
 */
export const PINNED_FIELDS: Record<ListKind, readonly string[]> = {
  tools: ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'],
  prompts: ['name', 'title', 'description', 'arguments'],
  resources: ['uri', 'name', 'title', 'description', 'mimeType'],
  resourceTemplates: ['uriTemplate', 'name', 'title', 'description', 'mimeType'],
};

/** The parts of a tool that are pinned: what a model reads and what the hub acts on. */
export interface PinnedDefinition {
  name: string;
  title?: unknown;
  description?: unknown;
  inputSchema?: unknown;
  outputSchema?: unknown;
  annotations?: unknown;
}

export type PendingReason = 'changed' | 'renamed';

/** One row of the pin table (src/ledger/pins.ts keeps them in the ledger database). */
export interface PinRecord {
  /** Absent: a tool's (tool_pins); else the kind of item_pins row. */
  kind?: ItemPinKind;
  server: string;
  /** The upstream tool name; of another kind, the item's key (prompt name, resource URI, uriTemplate). */
  tool: string;
  /** Approved definition; null when nothing was ever approved under this name (a rename). */
  hash: string | null;
  /**
   * Definitions approved before `hash`, still approved (newest last, at most MAX_VARIANTS): an
   * upstream that tailors a tool to each user lists one of them to each, and none is a change.
   */
  variants: string[];
  bodyHash: string | null;
  definition: string | null;
  /** A definition seen later and not approved yet. */
  pendingHash: string | null;
  pendingBodyHash: string | null;
  pendingDefinition: string | null;
  pendingReason: PendingReason | null;
  renamedFrom: string | null;
  firstSeenMs: number;
  approvedMs: number | null;
  /** 'first-seen' | 'cli' | 'auto-trusted' */
  approvedBy: string | null;
  pendingSinceMs: number | null;
  /**
   * The ledger's count of changes made elsewhere (pin_changes) when this row last took one, as
   * the hub read it (src/ledger/pins.ts); absent: none. A write based on an older reading is not
   * made: it would undo an approval the hub has not read yet. Carried by `{ ...rec }`.
   */
  changeSeq?: number;
  /**
   * Last written by a build before titles were pinned (its approved hashes leave the title out):
   * checkPins carries its approval over to the tool's title once. Never set by this build.
   */
  fromOlderBuild?: boolean;
}

/** Where pins live. Reads are synchronous (the list path must not wait on disk). */
export interface PinStore {
  get(server: string, tool: string): PinRecord | undefined;
  list(server?: string): PinRecord[];
  put(rec: PinRecord): void;
  /** Called with the records that changed outside this process (an approval by the CLI). */
  onExternalChange?(cb: (changed: PinRecord[]) => void): void;
}

export class MemoryPinStore implements PinStore {
  private readonly map = new Map<string, PinRecord>();
  get(server: string, tool: string): PinRecord | undefined {
    return this.map.get(`${server}\0${tool}`);
  }
  list(server?: string): PinRecord[] {
    return [...this.map.values()].filter((r) => server === undefined || r.server === server);
  }
  put(rec: PinRecord): void {
    this.map.set(`${rec.server}\0${rec.tool}`, { ...rec });
  }
}

export function pinnedDefinition(tool: Record<string, unknown>): PinnedDefinition {
  return pinnedItem('tools', tool) as unknown as PinnedDefinition;
}

/** The pinned fields of a listed item of any kind (PINNED_FIELDS), its key as a string. */
export function pinnedItem(kind: ListKind, item: Record<string, unknown>): Record<string, unknown> {
  const [key, ...rest] = PINNED_FIELDS[kind];
  const d: Record<string, unknown> = { [key!]: String(item[key!]) };
  for (const k of rest) if (item[k] !== undefined) d[k] = item[k];
  return d;
}

/** hashDefinition of a listed item of any kind. */
export function hashItem(kind: ListKind, item: Record<string, unknown>): Hashed {
  if (kind === 'tools') return hashDefinition(pinnedDefinition(item));
  const def = pinnedItem(kind, item);
  const json = canonicalJson(def);
  const { [PINNED_FIELDS[kind][0]!]: _key, ...body } = def;
  return { hash: sha256Hex(json), bodyHash: sha256Hex(canonicalJson(body)), json };
}

export interface Hashed {
  hash: string;
  /** The same definition without its name, to recognise a renamed tool. */
  bodyHash: string;
  /** Canonical JSON, stored so `tools diff` can show what changed. */
  json: string;
  /**
   * A tool with a `title`: its hash as builds before the title was pinned made it. A pin such a
   * build approved stays approved, and is moved to the hash with the title (checkPins), once.
   */
  untitledHash?: string;
}

export function hashDefinition(def: PinnedDefinition): Hashed {
  const json = canonicalJson(def);
  const { name: _n, ...body } = def;
  const h: Hashed = { hash: sha256Hex(json), bodyHash: sha256Hex(canonicalJson(body)), json };
  if (def.title !== undefined) {
    const { title: _t, ...untitled } = def;
    h.untitledHash = sha256Hex(canonicalJson(untitled));
  }
  return h;
}

/** Approved definitions kept besides the current one. */
export const MAX_VARIANTS = 16;

/** `variants` after `hash` is replaced by another approval. */
export function keptVariants(rec: Pick<PinRecord, 'hash' | 'variants'>, next: string): string[] {
  const out = rec.variants.filter((h) => h !== next && h !== rec.hash);
  if (rec.hash !== null && rec.hash !== next) out.push(rec.hash);
  return out.slice(-MAX_VARIANTS);
}

export type PinState = 'approved' | 'changed' | 'renamed';

export interface PinVerdict {
  state: PinState;
  hash: string;
  renamedFrom?: string;
}

/** Something worth an audit row and a log line. */
export interface PinEvent {
  /** 'approved': an operator accepted a change (seen by the hub when the pin store reloads). */
  kind: 'first-seen' | 'quarantined' | 'auto-approved' | 'reverted' | 'approved';
  /** Absent: a tool's. */
  itemKind?: ItemPinKind;
  server: string;
  /** The upstream name (of another kind, the item's key: prompt name, URI, uriTemplate). */
  tool: string;
  reason?: PendingReason;
  renamedFrom?: string;
  hash: string;
  previousHash?: string | null;
}

export interface PinServer {
  id: string;
  /** Trusted server whose config lets it approve its own changes. */
  autoApprove: boolean;
}

/**
 * Checks one server's current tools against the store. Writes what changed (first sightings,
 * new pending definitions, auto-approvals, reverts) and returns a verdict per tool plus the
 * events to report. Reporting happens once per distinct pending definition, not per list.
 * A rename is an approved definition whose name is gone from the list, reappearing under a
 * new name; `previous` (the names of the same list last time) narrows "gone" to names this
 * list really had, undefined = judge by the store alone (the first list after a start).
 */
export function checkPins(
  store: PinStore,
  server: PinServer,
  tools: readonly { name: string; def: Hashed }[],
  now: number,
  previous?: ReadonlySet<string>,
  /**
   * false for a list fetched with a principal's own credentials: it may show another version of
   * a tool than other users' lists, so listing an approved one does not end a quarantine that
   * another user's version is in.
   */
  mayRevert = true,
  /**
   * false for resources and templates: their key is an address, and a server that lists files or
   * records lists the same description under new addresses as a matter of course.
   */
  judgeRenames = true,
): { verdicts: Map<string, PinVerdict>; events: PinEvent[] } {
  const verdicts = new Map<string, PinVerdict>();
  const events: PinEvent[] = [];
  const listed = new Set(tools.map((t) => t.name));
  // Approved definitions by their body, for renames: looked up per new tool, built once (a scan
  // of every pin per new tool took 6.8 s for 2,000 new names against 80,000 pins). Built at the
  // first new name: puts before it change only listed tools, which are no rename's source.
  let byBody: Map<string, PinRecord[]> | undefined;
  const approvedWithBody = (bodyHash: string): PinRecord[] => {
    if (!byBody) {
      byBody = new Map();
      for (const r of store.list(server.id)) {
        if (r.hash === null || r.bodyHash === null) continue;
        const same = byBody.get(r.bodyHash);
        if (same) same.push(r);
        else byBody.set(r.bodyHash, [r]);
      }
    }
    return byBody.get(bodyHash) ?? [];
  };
  for (const { name, def } of tools) {
    let rec = store.get(server.id, name);
    if (rec?.fromOlderBuild && rec.hash !== def.hash && def.untitledHash !== undefined) {
      // Approved by a build that did not pin titles: the title it has now is taken as approved
      // with it, once (the row written by this build is no older build's any more). An approved
      // variant (a user's own version) likewise.
      if (rec.hash === def.untitledHash) {
        rec = { ...rec, hash: def.hash, bodyHash: def.bodyHash, definition: def.json, fromOlderBuild: false };
        store.put(rec);
      } else if (rec.variants.includes(def.untitledHash) && !rec.variants.includes(def.hash)) {
        rec = { ...rec, variants: [...rec.variants, def.hash] };
        store.put(rec);
      }
    }
    if (rec && rec.hash !== def.hash && rec.variants.includes(def.hash)) {
      verdicts.set(name, { state: 'approved', hash: def.hash });
      continue;
    }
    if (rec && rec.hash === def.hash) {
      if (rec.pendingHash !== null && mayRevert) {
        // The upstream went back to the approved definition: nothing is pending any more.
        store.put({ ...rec, ...NOTHING_PENDING });
        events.push({ kind: 'reverted', server: server.id, tool: name, hash: def.hash });
      }
      verdicts.set(name, { state: 'approved', hash: def.hash });
      continue;
    }
    let reason: PendingReason | null = null;
    let renamedFrom: string | null = null;
    if (rec) reason = 'changed';
    else if (judgeRenames) {
      const old = approvedWithBody(def.bodyHash).find((r) => r.tool !== name && !listed.has(r.tool) && (previous === undefined || previous.has(r.tool)));
      if (old) {
        reason = 'renamed';
        renamedFrom = old.tool;
      }
    }
    if (reason === null) {
      store.put(fresh(server.id, name, def, now));
      events.push({ kind: 'first-seen', server: server.id, tool: name, hash: def.hash });
      verdicts.set(name, { state: 'approved', hash: def.hash });
      continue;
    }
    if (server.autoApprove) {
      const base = rec ?? fresh(server.id, name, def, now);
      store.put({ ...approved(base, def, now, 'auto-trusted'), firstSeenMs: base.firstSeenMs });
      events.push({ kind: 'auto-approved', server: server.id, tool: name, reason, renamedFrom: renamedFrom ?? undefined, hash: def.hash, previousHash: rec?.hash ?? null });
      verdicts.set(name, { state: 'approved', hash: def.hash });
      continue;
    }
    if (rec && !mayRevert && rec.pendingHash !== null && rec.pendingHash !== def.hash) {
      // A user's own list does not put its version in place of another user's pending one: each
      // waits its turn, so an approval takes what was reviewed and the audit is not flooded by
      // two lists taking turns.
      verdicts.set(name, { state: reason, hash: def.hash, renamedFrom: renamedFrom ?? undefined });
      continue;
    }
    if (!rec || rec.pendingHash !== def.hash) {
      const base: PinRecord = rec ?? { ...fresh(server.id, name, def, now), hash: null, bodyHash: null, definition: null, approvedMs: null, approvedBy: null };
      store.put({
        ...base,
        pendingHash: def.hash,
        pendingBodyHash: def.bodyHash,
        pendingDefinition: def.json,
        pendingReason: reason,
        renamedFrom,
        pendingSinceMs: now,
      });
      events.push({ kind: 'quarantined', server: server.id, tool: name, reason, renamedFrom: renamedFrom ?? undefined, hash: def.hash, previousHash: rec?.hash ?? null });
    }
    const r = store.get(server.id, name)!;
    verdicts.set(name, { state: reason, hash: def.hash, renamedFrom: r.renamedFrom ?? undefined });
  }
  return { verdicts, events };
}

/**
 * A record's fields for "nothing waits for approval": what approving, a first sight and an
 * upstream going back to the approved definition each leave.
 */
const NOTHING_PENDING = {
  pendingHash: null,
  pendingBodyHash: null,
  pendingDefinition: null,
  pendingReason: null,
  renamedFrom: null,
  pendingSinceMs: null,
} as const satisfies Partial<PinRecord>;

function fresh(server: string, tool: string, def: Hashed, now: number): PinRecord {
  return {
    server,
    tool,
    hash: def.hash,
    variants: [],
    bodyHash: def.bodyHash,
    definition: def.json,
    ...NOTHING_PENDING,
    firstSeenMs: now,
    approvedMs: now,
    approvedBy: 'first-seen',
  };
}

function approved(rec: PinRecord, def: Hashed, now: number, by: string): PinRecord {
  return {
    ...rec,
    variants: keptVariants(rec, def.hash),
    hash: def.hash,
    bodyHash: def.bodyHash,
    definition: def.json,
    ...NOTHING_PENDING,
    approvedMs: now,
    approvedBy: by,
  };
}

/** Accept what is pending (the CLI does the same in SQL). Returns the updated record. */
export function approvePending(rec: PinRecord, now: number, by = 'cli'): PinRecord | undefined {
  if (rec.pendingHash === null || rec.pendingDefinition === null) return undefined;
  return approved(rec, { hash: rec.pendingHash, bodyHash: rec.pendingBodyHash ?? '', json: rec.pendingDefinition }, now, by);
}
