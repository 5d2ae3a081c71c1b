/**
 * `resources/read` results, per upstream and URI, fresh for the upstream's `ttlMs` (or the
 * configured `cacheTtlMs`). `public` results are shared; `private` ones are kept per upstream
 * authorization context (the partition key). `resources/updated` for a URI, and any restart of
 * its upstream, drop the entries at once. Interim `input_required` results and results of MRTR
 * retries are never stored.
 */
import { monotonicNow } from '../monotonic.js';

export interface CachedRead {
  result: Record<string, unknown>;
  remainingMs: number;
  scope: 'public' | 'private';
}

interface Entry {
  result: Record<string, unknown>;
  expires: number;
  scope: 'public' | 'private';
}

export const READ_CACHE_MAX_ENTRIES = 1000;
/** Larger results are not kept (a rough size: the JSON length of text and blobs). */
export const READ_CACHE_MAX_BYTES = 1024 * 1024;

function roughSize(result: Record<string, unknown>): number {
  let n = 0;
  const contents = result.contents;
  if (Array.isArray(contents))
    for (const c of contents) {
      const o = c as { text?: unknown; blob?: unknown };
      if (typeof o.text === 'string') n += o.text.length;
      if (typeof o.blob === 'string') n += o.blob.length;
    }
  return n;
}

/** Whether a read may be cached at all: a final result of a first (non-retry) request. */
export function cacheableRead(params: Record<string, unknown>, result: Record<string, unknown>): boolean {
  if (params.inputResponses !== undefined || params.requestState !== undefined) return false;
  return result.resultType === undefined || result.resultType === 'complete';
}

/** Invalidations remembered for reads still on their way; past this many, every such read is dropped. */
const MAX_REMEMBERED = 10_000;

export class ReadCache {
  private readonly entries = new Map<string, Entry>();
  readonly stats = { hits: 0, misses: 0 };
  /** Counts invalidations; `droppedAt` has the last one of each server (key: server) and URI. */
  private gen = 0;
  private readonly droppedAt = new Map<string, number>();
  /** Reads begun before this are not stored (what they were checked against was forgotten). */
  private floor = 0;

  constructor(
    private readonly now: () => number = monotonicNow,
    private readonly maxEntries = READ_CACHE_MAX_ENTRIES,
  ) {}

  get(server: string, partition: string, uri: string): CachedRead | undefined {
    const t = this.now();
    for (const key of [`${server}\0*\0${uri}`, `${server}\0${partition}\0${uri}`]) {
      const e = this.entries.get(key);
      if (!e) continue;
      if (t >= e.expires) {
        this.entries.delete(key);
        continue;
      }
      this.stats.hits++;
      return { result: e.result, remainingMs: e.expires - t, scope: e.scope };
    }
    this.stats.misses++;
    return undefined;
  }

  /** Taken when a read starts and given to put(): its result is not kept if its URI changed meanwhile. */
  mark(): number {
    return this.gen;
  }

  put(server: string, partition: string, uri: string, result: Record<string, unknown>, ttlMs: number, scope: 'public' | 'private', since?: number): void {
    if (!(ttlMs > 0) || roughSize(result) > READ_CACHE_MAX_BYTES) return;
    // A resources/updated (or a restart) that came while this read was on its way: the result
    // may be from before it, so it answers this read only.
    if (since !== undefined && (since < this.floor || (this.droppedAt.get(server) ?? 0) > since || (this.droppedAt.get(`${server}\0${uri}`) ?? 0) > since)) return;
    const key = `${server}\0${scope === 'public' ? '*' : partition}\0${uri}`;
    this.entries.delete(key); // re-insert: Map order is then least recently stored first
    this.entries.set(key, { result, expires: this.now() + ttlMs, scope });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  /** Drop a URI (every partition) or, without one, everything of a server. */
  invalidate(server: string, uri?: string): void {
    if (this.droppedAt.size >= MAX_REMEMBERED) {
      this.droppedAt.clear();
      this.floor = this.gen + 1;
    }
    this.droppedAt.set(uri === undefined ? server : `${server}\0${uri}`, ++this.gen);
    for (const k of [...this.entries.keys()]) {
      const [s, , u] = k.split('\0');
      if (s === server && (uri === undefined || u === uri)) this.entries.delete(k);
    }
  }

  get size(): number {
    return this.entries.size;
  }
}
