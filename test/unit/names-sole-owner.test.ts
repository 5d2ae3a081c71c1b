/**
 * NameAssigner.soleOwner routes a first call by one server's list alone (Catalog.ownerItem): its
 * claim is that `assign`, given every server's list, gives that name to that (server, upstream
 * name) whenever the server lists it, whatever the others list or were given before. Checked
 * against `assign` on configs drawn at random (a fixed seed): prefixes shared, empty, one the
 * start of another; names with `__`, too long, not of the mode's characters, ending as a hash
 * (one the tail of another's renamed form);
 * names stored by earlier listings under other prefixes, servers absent from the listing or gone
 * from the config.
 */
import { describe, expect, it } from 'vitest';
import { baseName, candidateName, MemoryNameStore, NameAssigner, PREFIX_SEPARATOR, type NameMode, type ServerNames } from '../../src/catalog/names.js';

function prng(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    return s / 0x7fffffff;
  };
}

const PREFIXES = ['', 'a', 'b', 'a-b', 'a_b', 'aa'];
const PARTS = ['x', 'y', '_', '__', 'a', 'b', 'a_b', 'aa', 'é', 'cafe01', '_beef12', '.', 'L'.repeat(40)];

describe('NameAssigner.soleOwner', () => {
  it("names only the owner assign gives the name to, when that server lists it", () => {
    const rnd = prng(20261206);
    const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;
    const name = () => Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => pick(PARTS)).join('');
    let pool: string[] = [];
    // Drawn from a few names a round, so that servers list the same names (collisions) now and earlier.
    const names = () => Array.from({ length: Math.floor(rnd() * 5) }, () => pick(pool));
    let claims = 0;
    for (let round = 0; round < 1000; round++) {
      pool = Array.from({ length: 6 }, name);
      const mode: NameMode = rnd() < 0.8 ? 'strict' : 'spec';
      const ids = ['s1', 's2', 's3', 's4'].slice(0, 1 + Math.floor(rnd() * 4));
      // Earlier listings (other prefixes, some servers absent) leave names in the store.
      const rows: [string, 'tool', string, string][] = [];
      const history = new MemoryNameStore();
      const put = history.put.bind(history);
      history.put = (server, kind, upstreamName, hubName) => {
        rows.push([server, kind as 'tool', upstreamName, hubName]);
        put(server, kind, upstreamName, hubName);
      };
      const earlier = new NameAssigner({ mode, store: history });
      for (let h = Math.floor(rnd() * 3); h > 0; h--) {
        const all: ServerNames[] = ids.map((id) => ({ id, prefix: pick(PREFIXES), names: names() }));
        earlier.assign('tool', all.filter(() => rnd() < 0.8), all);
      }
      // Some servers of the earlier listings are gone from the config now (their stored names stay).
      const configured = ids.filter(() => rnd() < 0.85).map((id) => ({ id, prefix: pick(PREFIXES) }));
      const listing: ServerNames[] = configured.map((s) => ({ ...s, names: names() })).filter(() => rnd() < 0.85);
      // Now and then a server also lists, after a name the hub renames, the tail of that renamed form: its base name is the other's hub name.
      for (const s of listing) {
        const renamed = s.names.map((n) => candidateName(s.id, s.prefix, n, mode)).find((c) => c.reason !== undefined);
        if (renamed && rnd() < 0.5) s.names = [...s.names, s.prefix === '' ? renamed.name : renamed.name.slice(s.prefix.length + PREFIX_SEPARATOR.length)];
      }
      const stored = () => {
        const s = new MemoryNameStore();
        for (const r of rows) s.put(...r);
        return s;
      };
      const given = new NameAssigner({ mode, store: stored() }).assign('tool', listing, configured);
      const candidates = new Set<string>(listing.flatMap((s) => s.names.map((n) => baseName(s.prefix, n))));
      for (const m of given.names.values()) for (const hubName of m.values()) candidates.add(hubName);
      for (const hubName of candidates) {
        const a = new NameAssigner({ mode, store: stored() });
        const owner = a.soleOwner('tool', hubName, configured);
        if (!owner || !listing.find((s) => s.id === owner.server)?.names.includes(owner.upstreamName)) continue;
        claims++;
        const holder = [...a.assign('tool', listing, configured).names].flatMap(([server, m]) => [...m].filter(([, h]) => h === hubName).map(([upstreamName]) => ({ server, upstreamName })));
        expect(holder, `${mode} ${hubName} ${JSON.stringify({ configured, listing, rows })}`).toEqual([owner]);
      }
    }
    expect(claims).toBeGreaterThan(500); // the check is not vacuous
  });

  it('names nobody for a base name its upstream name no longer holds: a collision form kept after the other server left', () => {
    const store = new MemoryNameStore();
    new NameAssigner({ store }).assign('tool', [
      { id: 't', prefix: 'a', names: ['u'] },
      { id: 's', prefix: 'a', names: ['u'] },
    ]);
    // t is gone from the config: s keeps its collision form, and a__u is nobody's.
    const now = new NameAssigner({ store });
    expect(now.soleOwner('tool', 'a__u', [{ id: 's', prefix: 'a' }])).toBeUndefined();
    expect(now.assign('tool', [{ id: 's', prefix: 'a', names: ['u'] }]).names.get('s')?.get('u')).toMatch(/^a__u_[0-9a-f]{8}$/);
  });
});
