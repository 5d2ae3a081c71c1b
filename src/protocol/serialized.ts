import type { Id } from './jsonrpc.js';
import { META_SERVER_INFO } from './meta.js';
import { plainFrozen } from './json-text.js';

/**
 * A JSON-RPC message that is already text. Aggregated lists are large and change rarely, so
 * the edge serialises each page's items once and splices them into every answer instead of
 * stringifying hundreds of kilobytes per request. A forwarded result is serialised once too
 * (resultJson, resultAnswer).
 */
export class Serialized {
  constructor(readonly text: string) {}
}

/** The wire text of a message, whether it came pre-serialised or as an object. */
export function wireText(msg: object): string {
  return msg instanceof Serialized ? msg.text : JSON.stringify(msg);
}

const arrays = new WeakMap<object, string>();

/** JSON of an array that is shared across answers (a cached list page), serialised once. */
export function sharedArrayJson(items: readonly unknown[]): string {
  let s = arrays.get(items);
  if (s === undefined) {
    s = JSON.stringify(items);
    arrays.set(items, s);
  }
  return s;
}

/**
 * `{"jsonrpc":"2.0","id":…,"result":{"<field>":<items>,…rest}}` with the items' cached JSON.
 * `rest` must not hold `field`.
 */
export function listResponse(id: string | number, field: string, items: readonly unknown[], rest: Record<string, unknown>): Serialized {
  const tail = JSON.stringify(rest);
  const more = tail.length > 2 ? `,${tail.slice(1, -1)}` : '';
  return new Serialized(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{${JSON.stringify(field)}:${sharedArrayJson(items)}${more}}}`);
}

type Obj = Record<string, unknown>;

const results = new WeakMap<object, string>();

/**
 * A forwarded result's JSON, serialised where the ledger measures it (responseBytes) and kept
 * for the edge, which splices it into its answer (resultAnswer) rather than stringifying the
 * result a second time (issue #9: ~5 ms per MB on the event loop). Undefined when it is no JSON.
 * Nothing changes a result in place once it is measured: the router's last step is the
 * measure, and the edge's era forms are copies (downstream/results.ts). The answer takes the
 * text out: a result kept on (a cached read) does not keep its text as well.
 */
export function resultJson(result: object): string | undefined {
  let s = results.get(result);
  if (s !== undefined) return s;
  try {
    s = JSON.stringify(result);
  } catch {
    return undefined;
  }
  if (typeof s !== 'string') return undefined;
  results.set(result, s);
  return s;
}

/**
 * The answer carrying `out`, the client's era's form of `result` (toModernResult,
 * toLegacyResult: a shallow copy with resultType, _meta, ttlMs or cacheScope set or left out):
 * when `result`'s JSON is known (resultJson), `out`'s is that text with its changed fields
 * written anew, the content not serialised again. Otherwise the object, stringified as ever.
 */
export function resultAnswer(id: Id, result: object, out: Obj): object {
  const text = results.get(result);
  if (text !== undefined) results.delete(result);
  const json = text === undefined ? undefined : changedJson(result as Obj, text, out);
  return json === undefined ? { jsonrpc: '2.0', id, result: out } : new Serialized(`{"jsonrpc":"2.0","id":${typeof id === 'number' ? String(id) : JSON.stringify(id)},"result":${json}}`);
}

/** The top-level fields the era forms change: small, so writing them anew costs little. */
const RESTATED = new Set(['resultType', '_meta', 'ttlMs', 'cacheScope']);

/**
 * JSON.stringify(to), given `text`, JSON.stringify(from), for `to` a shallow copy of `from` that
 * keeps its fields in order, with the same values, up to the first it changes, adds or leaves
 * out: from there on only RESTATED fields (else undefined: stringify `to`). The tail of `text`
 * those fields were is checked against their values now.
 */
function changedJson(from: Obj, text: string, to: Obj): string | undefined {
  const a = Object.keys(from);
  const b = Object.keys(to);
  let same = 0;
  while (same < a.length && same < b.length && a[same] === b[same] && from[a[same]!] === to[b[same]!]) same++;
  if (same === a.length && same === b.length) return text;
  const was = fieldsJson(from, a, same);
  const now = fieldsJson(to, b, same);
  if (was === undefined || now === undefined) return undefined;
  const end = text.length - 1 - was.length;
  if (end < 1 || text.charCodeAt(text.length - 1) !== 0x7d || !text.startsWith(was, end)) return undefined;
  // What precedes the tail is "{" or a separating comma (or, with no tail, the last value).
  const head = was !== '' && text.charCodeAt(end - 1) === 0x2c ? text.slice(0, end - 1) : text.slice(0, end);
  if (now === '') return `${head}}`;
  return head.length > 1 ? `${head},${now}}` : `{${now}}`;
}

/** `"k":v,…` of `o`'s fields `keys[from…]`, as JSON.stringify writes them; undefined when one is not RESTATED. */
function fieldsJson(o: Obj, keys: string[], from: number): string | undefined {
  let s = '';
  for (let i = from; i < keys.length; i++) {
    const k = keys[i]!;
    // A RESTATED name needs no escaping.
    if (!RESTATED.has(k)) return undefined;
    const v = o[k];
    let json = v === 'complete' ? '"complete"' : k === '_meta' ? serverInfoMetaJson(v) : undefined;
    if (json === undefined) {
      try {
        json = JSON.stringify(v);
      } catch {
        return undefined;
      }
      if (json === undefined) continue;
    }
    s += s === '' ? `"${k}":${json}` : `,"${k}":${json}`;
  }
  return s;
}

/** The serverInfo object whose `_meta` JSON is kept (serverInfoMetaJson), and that JSON. */
let keptInfo: object | undefined;
let keptInfoMeta = '';

/**
 * JSON.stringify(meta) for the `_meta` toModernResult gives a result the upstream sent none
 * with: the hub's serverInfo alone, the same object in every answer. Its JSON was made afresh
 * each time, ~4.5k instructions an answer (a small object's JSON.stringify: the serialiser's
 * set-up, two objects, their keys; callgrind, issue #9). Kept for a frozen serverInfo of plain
 * values only, whose JSON cannot change; anything else (more keys, another object) is
 * undefined: stringify it.
 */
function serverInfoMetaJson(meta: unknown): string | undefined {
  if (typeof meta !== 'object' || meta === null) return undefined;
  const info = (meta as Obj)[META_SERVER_INFO];
  if (typeof info !== 'object' || info === null) return undefined;
  let keys = 0;
  for (const _ in meta) if (++keys > 1) return undefined;
  if (info !== keptInfo) {
    if (!plainFrozen(info)) return undefined;
    keptInfo = info;
    keptInfoMeta = JSON.stringify({ [META_SERVER_INFO]: info });
  }
  return keptInfoMeta;
}
