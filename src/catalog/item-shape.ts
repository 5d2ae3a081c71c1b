import type { ListKind } from './lists.js';
import { clippedValue } from '../protocol/shown-value.js';

/**
 * The field types every client reads a listed item's fields in (tools, prompts, resources,
 * templates; digest §3). The SDK clients of both eras parse a list answer whole: one item of any
 * upstream with a `description` of 7, a resource without a `name`, or a prompt argument whose
 * `required` is "yes" failed the whole list for them, every other server's items with it. Its
 * schemas are tool-schemas.ts's question; where its icons point, icons.ts's.
 *
 * A `null` where a field may be left out (servers that write every field, unset ones as null)
 * means it is unsaid: it is left out of what clients get. Any other value of the wrong type
 * makes the item one no client can read: it is dropped, so the rest of the list reaches them.
 */

type Check = (v: unknown) => boolean;

const isString: Check = (v) => typeof v === 'string';
const isBoolean: Check = (v) => typeof v === 'boolean';
const isNumber: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const isMap: Check = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Fields that may be left out, and the type each must have when given. */
const OPTIONAL: Record<ListKind, Record<string, Check>> = {
  tools: { title: isString, description: isString, _meta: isMap, annotations: isMap, execution: isMap, outputSchema: isMap },
  prompts: { title: isString, description: isString, _meta: isMap, arguments: Array.isArray },
  resources: { title: isString, description: isString, _meta: isMap, mimeType: isString, size: isNumber, annotations: isMap },
  resourceTemplates: { title: isString, description: isString, _meta: isMap, mimeType: isString, annotations: isMap },
};

/** Fields an item must have (besides its key, without which it is not listed at all). */
const REQUIRED: Partial<Record<ListKind, Record<string, Check>>> = {
  resources: { name: isString },
  resourceTemplates: { name: isString },
};

const TOOL_HINTS = ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'];

/**
 * A field's value as a dropped item's reason (a log line, a `catalog/drop` row) quotes it: cut
 * by clippedValue, which redacts before the cut. Cut first, a token the server put there (a
 * `_meta: "ghp_…"`) kept all but its end, which no rule of the log's or the ledger's redaction
 * recognised any more (too short for its shape).
 */
function said(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  return typeof v === 'object' ? 'an object' : `${typeof v} ${clippedValue(JSON.stringify(v), 40)}`;
}

/** Why a prompt's `arguments` or a resource's `annotations` cannot be read, or null. */
function nestedProblem(kind: ListKind, item: Record<string, unknown>): string | null {
  if (kind === 'prompts' && Array.isArray(item.arguments)) {
    for (const [i, a] of item.arguments.entries()) {
      const at = `arguments[${i}]`;
      if (!isMap(a)) return `its ${at} is ${said(a)}, not an object`;
      const arg = a as Record<string, unknown>;
      if (!isString(arg.name)) return `its ${at}.name is ${arg.name === undefined ? 'missing' : said(arg.name)}`;
      for (const [k, ok] of [['title', isString], ['description', isString], ['required', isBoolean]] as const)
        if (arg[k] !== undefined && arg[k] !== null && !ok(arg[k])) return `its ${at}.${k} is ${said(arg[k])}`;
    }
  }
  if ((kind === 'resources' || kind === 'resourceTemplates') && isMap(item.annotations)) {
    const ann = item.annotations as Record<string, unknown>;
    const audience = ann.audience;
    if (audience !== undefined && audience !== null && !(Array.isArray(audience) && audience.every((x) => x === 'user' || x === 'assistant')))
      return 'its annotations.audience is not a list of "user" and "assistant"';
    if (ann.priority !== undefined && ann.priority !== null && !(isNumber(ann.priority) && (ann.priority as number) >= 0 && (ann.priority as number) <= 1))
      return `its annotations.priority is ${said(ann.priority)}, not a number from 0 to 1`;
    if (ann.lastModified !== undefined && ann.lastModified !== null && !isString(ann.lastModified)) return `its annotations.lastModified is ${said(ann.lastModified)}`;
  }
  if (kind === 'tools' && isMap(item.annotations)) {
    const ann = item.annotations as Record<string, unknown>;
    if (ann.title !== undefined && ann.title !== null && !isString(ann.title)) return `its annotations.title is ${said(ann.title)}`;
    for (const h of TOOL_HINTS) if (ann[h] !== undefined && ann[h] !== null && !isBoolean(ann[h])) return `its annotations.${h} is ${said(ann[h])}, not a boolean`;
  }
  return null;
}

/** A copy of `o` without the keys whose value is null, or `o` itself when it has none. */
function withoutNulls(o: Record<string, unknown>, keys: Iterable<string>): Record<string, unknown> {
  let out = o;
  for (const k of keys) {
    if (out[k] !== null) continue;
    if (out === o) out = { ...o };
    delete out[k];
  }
  return out;
}

/** An icon every client reads (`src` a string; `mimeType`, `sizes`, `theme` of their types when given). */
function readableIcon(i: unknown): boolean {
  if (!isMap(i)) return false;
  const icon = i as Record<string, unknown>;
  if (!isString(icon.src)) return false;
  if (icon.mimeType !== undefined && !isString(icon.mimeType)) return false;
  if (icon.sizes !== undefined && !(Array.isArray(icon.sizes) && icon.sizes.every(isString))) return false;
  return icon.theme === undefined || icon.theme === 'light' || icon.theme === 'dark';
}

/**
 * Icons are decoration: one a client cannot read is left out (all of them, when `icons` is no
 * list), not the item. An untrusted server's were screened for where they point (icons.ts).
 */
function withReadableIcons(item: Record<string, unknown>): Record<string, unknown> {
  const icons = item.icons;
  if (icons === undefined || (Array.isArray(icons) && icons.every(readableIcon))) return item;
  const kept = Array.isArray(icons) ? icons.filter(readableIcon) : [];
  const { icons: _left, ...rest } = item;
  return kept.length ? { ...rest, icons: kept } : rest;
}

/**
 * The item as clients can read it (`null` in a field that may be left out, left out: at the top,
 * in a prompt's arguments and in annotations), or, when a field has a value of another type,
 * why no client can read it.
 */
export function readableItem(kind: ListKind, item: Record<string, unknown>): { item: Record<string, unknown> } | { problem: string } {
  let out = withReadableIcons(withoutNulls(item, Object.keys(OPTIONAL[kind])));
  if (kind === 'prompts' && Array.isArray(out.arguments) && out.arguments.some((a) => isMap(a) && Object.values(a as object).includes(null))) {
    out = { ...out, arguments: out.arguments.map((a) => (isMap(a) ? withoutNulls(a as Record<string, unknown>, ['title', 'description', 'required']) : a)) };
  }
  if (isMap(out.annotations) && Object.values(out.annotations as object).includes(null)) {
    const keys = kind === 'tools' ? ['title', ...TOOL_HINTS] : ['audience', 'priority', 'lastModified'];
    out = { ...out, annotations: withoutNulls(out.annotations as Record<string, unknown>, keys) };
  }
  for (const [k, ok] of Object.entries(REQUIRED[kind] ?? {})) if (!ok(out[k])) return { problem: `its ${k} is ${out[k] === undefined ? 'missing' : said(out[k])}` };
  for (const [k, ok] of Object.entries(OPTIONAL[kind])) if (out[k] !== undefined && !ok(out[k])) return { problem: `its ${k} is ${said(out[k])}` };
  const nested = nestedProblem(kind, out);
  return nested ? { problem: nested } : { item: out };
}
