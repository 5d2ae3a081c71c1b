import type { ServerConfig } from '../config/types.js';
import { paramHeaderAnnotationProblem } from '../protocol/param-headers.js';
import { readableItem } from './item-shape.js';
import { toolSchemaProblem } from './tool-schemas.js';
import type { PluginRunner } from '../plugins/runner.js';
import type { ItemFlag } from '../plugins/types.js';
import { effectiveAnnotations, type AnnotationSource } from './annotations.js';
import { withScreenedIcons } from './icons.js';
import { toolFilter } from './filters.js';
import { NAME_FIELD, type ListKind } from './lists.js';
import { checkPins, hashItem, type PinEvent, type PinStore, type PinVerdict } from './pins.js';

/**
 * One upstream's list as the hub exposes it: allow/deny, annotations the hub can stand behind,
 * pins, plugin flags, and the decision to show or hide each item. Built once per upstream list
 * version (not per client request) and cached with it.
 */

export type PinningPolicy = 'block' | 'warn';
export type PoisoningPolicy = 'warn' | 'block';

export interface PartPolicy {
  pinning: PinningPolicy;
  poisoning: PoisoningPolicy;
}

export interface PartServer {
  id: string;
  config: ServerConfig;
  era: string | undefined;
}

export interface PartRecord {
  /** Tool or prompt name, or resource URI / template, as the upstream listed it. */
  upstreamName: string;
  /** As the upstream listed it. */
  upstream: Record<string, unknown>;
  /** As it goes downstream (before the hub name is applied): plugin rewrites, hub annotations. */
  item: Record<string, unknown>;
  /** Tools: the annotations the hub uses and sends, and where they came from. */
  annotations?: Record<string, unknown>;
  annotationSource?: AnnotationSource;
  pin?: PinVerdict;
  flags: (ItemFlag & { plugin?: string })[];
  /** Why it is not exposed; undefined = exposed. */
  hidden?: string;
  /** Filtered out by `servers.<id>.tools.allow/deny`: not pinned, not named. */
  denied?: boolean;
}

export interface PartDeps {
  /** The pins of this list's kind. */
  pins: PinStore;
  plugins: PluginRunner | undefined;
  policy: PartPolicy;
  now: () => number;
  /** Pin events, hidden poisoned items and dropped tools, for the log and the ledger. */
  report(e: CatalogEvent): void;
  /** The names of this list last time (see checkPins); undefined = unknown. */
  previous?: ReadonlySet<string>;
  /** Fetched with a principal's own credentials: it may show that principal's version of a tool. */
  ownList?: boolean;
}

export interface PoisonEvent {
  kind: 'poisoning';
  server: string;
  tool: string;
  itemKind: ListKind;
  blocked: boolean;
  flags: ItemFlag[];
}

/**
 * An item the hub never shows: a tool no conforming HTTP client may use (`x-mcp-header`, digest
 * §3.4, §8.12), or one whose schemas no client can read (`schema`, catalog/tool-schemas.ts); an
 * item of any kind with a field of a type no client reads (`shape`, catalog/item-shape.ts).
 */
export interface DropEvent {
  kind: 'dropped';
  rule: 'x-mcp-header' | 'schema' | 'shape';
  server: string;
  /** The item's key (a tool's or prompt's upstream name, a URI, a uriTemplate). */
  tool: string;
  /** Absent: a tool. */
  itemKind?: ListKind;
  reason: string;
}

export type CatalogEvent = PinEvent | PoisonEvent | DropEvent;


/** What the log and the audit call an item of each kind. */
export const ITEM_NOUN: Record<ListKind, string> = { tools: 'tool', prompts: 'prompt', resources: 'resource', resourceTemplates: 'resource template' };

/** `_meta` key of a listed item: why the hub finds it suspicious. */
const META_FLAGS = 'dev.switchyard/flags';

/**
 * The hub offers its clients no tasks, so a tool's `execution.taskSupport` means nothing to them:
 * one "required" the hub runs as a task itself (router/legacy-task.ts), and SDK clients refuse to
 * call a tool marked "required" when they see no tasks. Other `execution` fields pass on.
 */
function withoutTaskSupport(tool: Record<string, unknown>): Record<string, unknown> {
  const e = tool.execution;
  if (e === null || typeof e !== 'object' || Array.isArray(e) || !('taskSupport' in e)) return tool;
  const { taskSupport: _dropped, ...rest } = e as Record<string, unknown>;
  if (Object.keys(rest).length > 0) tool.execution = rest;
  else delete tool.execution;
  return tool;
}

/**
 * `item` without the upstream's own `_meta["dev.switchyard/flags"]`, and those flags (its
 * strings, at most 64); undefined when it has none.
 */
function withoutUpstreamFlags(item: Record<string, unknown>): { item: Record<string, unknown>; flags: string[] } | undefined {
  const meta = item._meta;
  if (typeof meta !== 'object' || meta === null || !Object.hasOwn(meta, META_FLAGS)) return undefined;
  const { [META_FLAGS]: theirs, ...rest } = meta as Record<string, unknown>;
  const flags = Array.isArray(theirs) ? theirs.filter((f): f is string => typeof f === 'string').slice(0, 64) : [];
  return { item: { ...item, _meta: rest }, flags };
}

/**
 * An item as a plugin's onList left it, held to what an upstream's item is held to above (a
 * client must be able to read it, a tool's schema must be usable, a tool names no task support),
 * with the name (URI, template) the hub routes and pins it by unchanged: a resource's URI
 * rewritten was listed where no read could reach, and a renamed tool went on under its old name.
 */
function pluginLeft(kind: ListKind, left: Record<string, unknown>, was: Record<string, unknown>): { item: Record<string, unknown> } | { problem: string } {
  const field = NAME_FIELD[kind];
  const name = JSON.stringify(String(was[field]).slice(0, 128));
  if (left[field] !== was[field]) return { problem: `${name}: its ${field} was changed, which the hub routes by` };
  const readable = readableItem(kind, left);
  if ('problem' in readable) return { problem: `${name}: ${readable.problem}` };
  if (kind !== 'tools') return readable;
  const problem = toolSchemaProblem(readable.item) ?? paramHeaderAnnotationProblem(readable.item.inputSchema);
  return problem ? { problem: `${name}: ${problem}` } : { item: withoutTaskSupport({ ...readable.item }) };
}

export async function buildPart(kind: ListKind, s: PartServer, items: readonly Record<string, unknown>[], deps: PartDeps): Promise<PartRecord[]> {
  const field = NAME_FIELD[kind];
  const records: PartRecord[] = [];
  const seen = new Set<string>();
  const allowed = kind === 'tools' ? toolFilter(s.config.tools) : () => true;
  const trusted = s.config.trust === 'trusted';
  for (const it of items) {
    const name = it[field];
    if (typeof name !== 'string' || seen.has(name)) continue; // nameless or duplicate: cannot be routed
    seen.add(name);
    const r: PartRecord = { upstreamName: name, upstream: it, item: it, flags: [] };
    if (!allowed(name)) {
      r.denied = true;
      r.hidden = 'not allowed by servers.' + s.id + '.tools allow/deny';
    } else if (kind === 'tools') {
      const eff = effectiveAnnotations(trusted, it.annotations, s.config.tools.byName[name]?.annotations);
      // Frozen: the same object is the listed tool's and every call's `ctx.tool.annotations`
      // (no copy per call), and a plugin that wrote there changed what every client was shown.
      r.annotations = Object.freeze(eff.annotations);
      r.annotationSource = eff.source;
      r.item = withoutTaskSupport({ ...it, annotations: eff.annotations });
      // A client could not read the list it is in: dropped, so the rest of the list reaches clients.
      const shape = toolSchemaProblem(it);
      // An HTTP client must drop it, and the hub could neither mirror nor check its headers.
      const bad = shape ? null : paramHeaderAnnotationProblem(it.inputSchema);
      if (shape) {
        r.hidden = `dropped: ${shape}`;
        deps.report({ kind: 'dropped', rule: 'schema', server: s.id, tool: name, reason: shape });
      } else if (bad) {
        r.hidden = `dropped: its x-mcp-header annotation breaks the rules (${bad})`;
        deps.report({ kind: 'dropped', rule: 'x-mcp-header', server: s.id, tool: name, reason: bad });
      }
    }
    if (!r.denied && !r.hidden) {
      // One field of a type no client reads fails their whole list: dropped, as above (a null
      // where a field may be left out is left out instead).
      const readable = readableItem(kind, r.item);
      if ('item' in readable) r.item = readable.item;
      else {
        r.hidden = `dropped: ${readable.problem}`;
        deps.report({ kind: 'dropped', rule: 'shape', server: s.id, tool: name, ...(kind === 'tools' ? {} : { itemKind: kind }), reason: readable.problem });
      }
    }
    records.push(r);
  }
  const live = records.filter((r) => !r.denied);
  // Out before anything reads the item: plugins (description-checks flagged the quoted text of
  // an upstream hub's own poisoning flags, on a field no client then saw). A trusted server's
  // flags (a hub behind this one) are its judgement, shown beside this hub's below.
  const theirFlags = new Map<PartRecord, string[]>();
  for (const r of live) {
    const split = withoutUpstreamFlags(r.item);
    if (!split) continue;
    r.item = split.item;
    if (trusted && split.flags.length) theirFlags.set(r, split.flags);
  }
  if (!trusted) for (const r of live) r.item = withScreenedIcons(r.item, s.config.url);

  // A prompt or a template changed after it was first seen is as much a rug pull as a tool (its
  // description is read by the model, its arguments asked of the user). Not a listed resource:
  // it is data under an address, whose list and descriptions change with what it holds (files,
  // records, "(3 unread)"); held at each change, and a pin kept for every address ever listed,
  // a live server would be quarantined all day. Its text is screened as any other's.
  if (live.length && kind !== 'resources') {
    const { verdicts, events } = checkPins(
      deps.pins,
      { id: s.id, autoApprove: trusted && s.config.autoApprove === true },
      live.map((r) => ({ name: r.upstreamName, def: hashItem(kind, r.upstream) })),
      deps.now(),
      deps.previous,
      !deps.ownList,
      kind === 'tools' || kind === 'prompts',
    );
    for (const e of events) deps.report(kind === 'tools' ? e : { ...e, itemKind: kind });
    for (const r of live) {
      r.pin = verdicts.get(r.upstreamName);
      if (r.pin && r.pin.state !== 'approved') {
        const why = r.pin.state === 'renamed' ? `same definition as the approved ${ITEM_NOUN[kind]} "${r.pin.renamedFrom}" under a new name` : 'definition changed since it was approved';
        r.flags.push({ code: `pin-${r.pin.state}`, message: why, category: 'pinning' });
        if (deps.policy.pinning === 'block') r.hidden = `quarantined: ${why}; see \`switchyard tools diff\``;
      }
    }
  }

  if (deps.plugins && live.length) {
    const out = await deps.plugins.list(kind, { id: s.id, trust: s.config.trust, era: s.era }, live.map((r) => r.item), (left, was, i) =>
      // One the hub hides already (dropped for its shape, quarantined) goes nowhere, whatever a plugin left of it.
      live[i]!.hidden ? { item: left } : pluginLeft(kind, left, was),
    );
    live.forEach((r, i) => {
      r.item = out.items[i];
      const fl = out.flags.get(i);
      if (fl) r.flags.push(...fl);
      const h = out.hidden.get(i);
      if (h && !r.hidden) r.hidden = h;
    });
  }

  for (const r of live) {
    const poison = r.flags.filter((f) => f.category === 'poisoning');
    if (poison.length === 0) continue;
    const blocked = deps.policy.poisoning === 'block' && !r.hidden;
    if (blocked) r.hidden = `poisoning: ${poison.map((f) => f.code).join(', ')}`;
    deps.report({ kind: 'poisoning', server: s.id, tool: r.upstreamName, itemKind: kind, blocked, flags: poison });
  }

  // Operators and clients can see why a shown item is suspicious. The key is the hub's: an
  // upstream's own is dropped (above), so no item passes for one the hub flagged, or checked;
  // a trusted server's are kept, after the hub's own, each saying whose it is. Category
  // "upstream": shown, never a reason to hide the item here (this hub's own checks decide).
  for (const r of live) {
    if (r.hidden) continue;
    for (const f of theirFlags.get(r) ?? []) {
      const m = /^([\w.-]{1,64}): ([^]*)$/.exec(f);
      r.flags.push({ code: m ? m[1]! : 'flag', message: `${m ? m[2]! : f} (flagged by ${s.id})`, category: 'upstream' });
    }
    const meta = typeof r.item._meta === 'object' && r.item._meta !== null ? (r.item._meta as Record<string, unknown>) : undefined;
    // A plugin's replace() may have put the key back: the hub's alone still.
    if (r.flags.length === 0 && !(meta && Object.hasOwn(meta, META_FLAGS))) continue;
    const { [META_FLAGS]: _plugins, ...rest } = meta ?? {};
    r.item = { ...r.item, _meta: r.flags.length ? { ...rest, [META_FLAGS]: r.flags.map((f) => `${f.code}: ${f.message}`) } : rest };
  }
  return records;
}
