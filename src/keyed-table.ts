/**
 * A keyed table for entries that come and go with every call (requests in flight, their
 * ledger rows, cancellers), where a long-lived `Map` or `Set` would churn.
 *
 * Why not a Map: a long-lived Map churned like that (64 entries alive, one set and one delete
 * per call) runs fine until V8's first full collection; from then on every scavenge finds what
 * it held alive and promotes it, 1.7 to 14 MB each instead of ~30 KB (test/unit/keyed-table.test.ts
 * shows it on this Node). In the hub that was the garbage collector's "bad mode": scavenges of
 * 6–10 ms instead of 1–1.5, a quarter of the event loop (docs/BENCHMARKS.md, twenty-first
 * round). The mechanism: once a Map's or a Set's table is in the old generation, V8 allocates
 * each table a rehash replaces it with there too, and the table it replaces, dead but not
 * collected before the next full collection, still points at the entries it held (and links to
 * its successor for live iterators): every scavenge finds them alive through it and promotes
 * them. A dictionary-mode object, and a plain array, do not keep their entries so.
 * src/downstream/quiet-answers.ts held the last one found on the hot path (a Set).
 *
 * Keys are strings or numbers, kept as an object's property names: `1` and `"1"` are the same
 * key. `values()` lists integer keys first, in ascending order, then the others in insertion
 * order (JavaScript's property order).
 */
export class KeyedTable<V> {
  private table: Record<string, V> = Object.create(null) as Record<string, V>;
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(key: string | number): V | undefined {
    return this.table[key];
  }

  has(key: string | number): boolean {
    return key in this.table;
  }

  set(key: string | number, value: V): this {
    if (!(key in this.table)) this.count++;
    this.table[key] = value;
    return this;
  }

  delete(key: string | number): boolean {
    if (!(key in this.table)) return false;
    delete this.table[key];
    this.count--;
    return true;
  }

  /** A snapshot: entries set or deleted while it is walked do not change it. */
  values(): V[] {
    return this.count === 0 ? [] : Object.values(this.table);
  }

  /** Keys (as strings) and values, as values() orders them. A snapshot. */
  entries(): [string, V][] {
    return this.count === 0 ? [] : Object.entries(this.table);
  }

  clear(): void {
    this.table = Object.create(null) as Record<string, V>;
    this.count = 0;
  }
}

/**
 * KeyedTable for integer keys handed out in increasing order (request ids, ledger row ids),
 * as fast as a Map: each id has one slot, its low bits, so consecutive ids take consecutive
 * slots. An id whose slot a newer one needs while the table has room (a long-lived stream) moves
 * to a KeyedTable beside it; a full table doubles. The arrays are replaced only when the table
 * grows, and an old array links to nothing.
 */
export class IdTable<V> {
  private keys: (number | undefined)[];
  private vals: (V | undefined)[];
  private mask: number;
  private count = 0;
  private readonly moved = new KeyedTable<V>();

  constructor(capacity = 64) {
    const size = 2 ** Math.ceil(Math.log2(Math.max(8, capacity)));
    this.keys = new Array<number | undefined>(size).fill(undefined);
    this.vals = new Array<V | undefined>(size).fill(undefined);
    this.mask = size - 1;
  }

  get size(): number {
    return this.count + this.moved.size;
  }

  get(id: number): V | undefined {
    const i = id & this.mask;
    if (this.keys[i] === id) return this.vals[i];
    return this.moved.size === 0 ? undefined : this.moved.get(id);
  }

  has(id: number): boolean {
    return this.keys[id & this.mask] === id || (this.moved.size > 0 && this.moved.has(id));
  }

  set(id: number, value: V): this {
    if (!Number.isInteger(id)) throw new TypeError(`IdTable keys are integers, not ${id}`);
    let i = id & this.mask;
    const k = this.keys[i];
    if (k === id) {
      this.vals[i] = value;
      return this;
    }
    if (this.moved.size > 0 && this.moved.has(id)) {
      this.moved.set(id, value);
      return this;
    }
    if (k !== undefined) {
      if ((this.count + 1) * 2 > this.keys.length) {
        this.grow();
        return this.set(id, value);
      }
      this.moved.set(k, this.vals[i] as V);
      this.count--;
    }
    this.keys[i] = id;
    this.vals[i] = value;
    this.count++;
    return this;
  }

  delete(id: number): boolean {
    const i = id & this.mask;
    if (this.keys[i] === id) {
      this.keys[i] = undefined;
      this.vals[i] = undefined;
      this.count--;
      return true;
    }
    return this.moved.size > 0 && this.moved.delete(id);
  }

  /** In ascending order of key (for ids handed out in order: oldest first). A snapshot. */
  values(): V[] {
    if (this.size === 0) return [];
    // One entry (the ledger's lone begin at each hand-over, at concurrency 1): nothing to sort.
    if (this.count === 1 && this.moved.size === 0) {
      for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== undefined) return [this.vals[i] as V];
    }
    const all: [number, V][] = [];
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== undefined) all.push([this.keys[i]!, this.vals[i] as V]);
    for (const [k, v] of this.moved.entries()) all.push([Number(k), v]);
    return all.sort((a, b) => a[0] - b[0]).map(([, v]) => v);
  }

  /**
   * Slot by slot, and only while entries are left, rather than by `fill`: the ledger clears its
   * table of begins at every hand-over, mostly holding none or one, and each `fill` (a call into
   * the runtime) cost ~1.9k instructions for 64 slots, counted by callgrind, where this walk costs a
   * few hundred; nor is a new table made for `moved` when it holds nothing.
   */
  clear(): void {
    const keys = this.keys;
    const vals = this.vals;
    for (let i = 0, left = this.count; left > 0 && i < keys.length; i++) {
      if (keys[i] === undefined) continue;
      keys[i] = undefined;
      vals[i] = undefined;
      left--;
    }
    this.count = 0;
    if (this.moved.size > 0) this.moved.clear();
  }

  /** Twice the slots; ids that had moved come back when their slot is free. */
  private grow(): void {
    const keys = this.keys;
    const vals = this.vals;
    const size = keys.length * 2;
    this.keys = new Array<number | undefined>(size).fill(undefined);
    this.vals = new Array<V | undefined>(size).fill(undefined);
    this.mask = size - 1;
    this.count = 0;
    const moved = this.moved.entries();
    this.moved.clear();
    for (let i = 0; i < keys.length; i++) if (keys[i] !== undefined) this.set(keys[i]!, vals[i] as V);
    for (const [k, v] of moved) this.set(Number(k), v);
  }
}
