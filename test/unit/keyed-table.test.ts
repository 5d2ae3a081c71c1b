import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { IdTable, KeyedTable } from '../../src/keyed-table.js';

type Op = { op: 'set' | 'get' | 'delete' | 'has'; key: number } | { op: 'clear' };

/** Keys as the tables meet them: ids counting up, a few that stay far behind, odd ones. */
const idKey = fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 2 ** 40 }), fc.constantFrom(0, 1, 7, 8, 64, 65, 128, 2 ** 31, 2 ** 32 + 1));
const ops = (key: fc.Arbitrary<number>) =>
  fc.array(
    fc.oneof(
      { weight: 5, arbitrary: fc.record({ op: fc.constant('set' as const), key }) },
      { weight: 3, arbitrary: fc.record({ op: fc.constant('delete' as const), key }) },
      { weight: 2, arbitrary: fc.record({ op: fc.constantFrom('get' as const, 'has' as const), key }) },
      { weight: 1, arbitrary: fc.constant({ op: 'clear' as const }) },
    ),
    { maxLength: 400 },
  );

describe('IdTable', () => {
  it('answers like a Map for any sequence of operations, and lists its values in ascending key order', () => {
    fc.assert(
      fc.property(ops(idKey), fc.integer({ min: 1, max: 70 }), (seq: Op[], capacity) => {
        const t = new IdTable<string>(capacity);
        const m = new Map<number, string>();
        seq.forEach((o, n) => {
          if (o.op === 'clear') {
            t.clear();
            m.clear();
          } else if (o.op === 'set') {
            t.set(o.key, `v${n}`);
            m.set(o.key, `v${n}`);
          } else if (o.op === 'delete') expect(t.delete(o.key)).toBe(m.delete(o.key));
          else if (o.op === 'has') expect(t.has(o.key)).toBe(m.has(o.key));
          else expect(t.get(o.key)).toBe(m.get(o.key));
          expect(t.size).toBe(m.size);
        });
        expect(t.values()).toEqual([...m.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps ids counting up in one slot each around one that stays, without growing', () => {
    const t = new IdTable<number>(64);
    t.set(5, 5); // a long-lived stream
    for (let id = 6; id < 100_000; id++) {
      t.set(id, id);
      if (id - 20 > 5) t.delete(id - 20);
    }
    expect(t.size).toBe(21);
    expect(t.get(5)).toBe(5);
    expect(t.values()[0]).toBe(5);
    // 21 entries fit the 64 slots it started with: the arrays were never replaced.
    expect((t as unknown as { keys: unknown[] }).keys.length).toBe(64);
  });

  it('refuses a key that is not an integer', () => {
    expect(() => new IdTable().set(1.5, 'x')).toThrow(TypeError);
    expect(new IdTable().get(Number.NaN)).toBeUndefined();
  });
});

describe('KeyedTable', () => {
  it('answers like a Map for string keys, those named like Object.prototype members included', () => {
    const key = fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', '1', '01', '-1'));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.constantFrom('set', 'delete', 'get', 'has'), key), { maxLength: 200 }), (seq) => {
        const t = new KeyedTable<number>();
        const m = new Map<string, number>();
        seq.forEach(([op, k], n) => {
          if (op === 'set') {
            t.set(k, n);
            m.set(k, n);
          } else if (op === 'delete') expect(t.delete(k)).toBe(m.delete(k));
          else if (op === 'has') expect(t.has(k)).toBe(m.has(k));
          else expect(t.get(k)).toBe(m.get(k));
          expect(t.size).toBe(m.size);
        });
        expect(t.values().sort()).toEqual([...m.values()].sort());
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * The reason the tables exist (src/keyed-table.ts): a long-lived keyed store churned at every
 * call, 64 entries alive at a time, each holding ~1 KB. Run in a child with --trace-gc-nvp: the
 * mean bytes each scavenge promotes. V8's Map is kept as the control, so that the test shows the
 * effect it guards against on this Node.
 */
async function promotedPerScavenge(store: 'Map' | 'IdTable' | 'KeyedTable'): Promise<number> {
  const dist = resolve('dist/src/keyed-table.js');
  expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
  const script = `
    const { IdTable, KeyedTable } = await import(${JSON.stringify(pathToFileURL(dist).href)});
    const store = new ${store}();
    const live = [];
    for (let id = 0; id < 400_000; id++) {
      if (id === 100_000) { gc(); console.log('FULL GC DONE'); }
      store.set(id, { payload: new Array(100).fill(id), more: { a: [id], b: String(id) } });
      live.push(id);
      if (live.length > 64) store.delete(live.shift());
    }`;
  const child = spawn(process.execPath, ['--single-threaded-gc', '--expose-gc', '--trace-gc-nvp', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
  expect(await new Promise((r) => child.once('exit', r))).toBe(0);
  const after = out.slice(out.indexOf('FULL GC DONE'));
  const promoted = [...after.matchAll(/gc=s .*? promoted=(\d+)/g)].map((m) => Number(m[1]));
  expect(promoted.length).toBeGreaterThan(10);
  return promoted.reduce((a, b) => a + b, 0) / promoted.length;
}

describe('churned keyed stores and V8 scavenges', () => {
  it('a Map keeps what it held alive scavenge after scavenge; IdTable and KeyedTable do not', async () => {
    const [map, ids, keyed] = await Promise.all([promotedPerScavenge('Map'), promotedPerScavenge('IdTable'), promotedPerScavenge('KeyedTable')]);
    expect(map).toBeGreaterThan(1024 * 1024);
    expect(ids).toBeLessThan(512 * 1024);
    expect(keyed).toBeLessThan(512 * 1024);
  }, 60_000);
});
