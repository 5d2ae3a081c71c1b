import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  candidateName,
  foreignTo,
  heldIn,
  MemoryNameStore,
  NAME_RULES,
  NameAssigner,
  nameHash,
  type Assignment,
  type NameMode,
  type ServerNames,
} from '../../src/catalog/names.js';

function flat(a: Assignment): Map<string, string> {
  const out = new Map<string, string>();
  for (const [server, names] of a.names) for (const [up, hub] of names) out.set(`${server}\0${up}`, hub);
  return out;
}

function expectWellFormed(a: Assignment, servers: ServerNames[], mode: NameMode, assigner: NameAssigner): void {
  const all = [...flat(a).values()];
  expect(new Set(all).size).toBe(all.length); // collision-free
  for (const hub of all) expect(hub).toMatch(NAME_RULES[mode].valid);
  const foreign = foreignTo(servers.map((s) => s.prefix));
  for (const s of servers) {
    for (const up of s.names) {
      const hub = a.names.get(s.id)!.get(up)!;
      expect(assigner.resolve('tool', hub)).toEqual({ server: s.id, upstreamName: up });
      expect(foreign(hub, s.prefix), `${s.id}'s ${hub} lies in another prefix's space`).toBe(false);
    }
  }
}

/** The prefix of the server a `server\0upstream` key of `flat` names. */
const prefixOf = (servers: ServerNames[], key: string) => servers.find((s) => s.id === key.split('\0')[0])!.prefix;

// A small pool of names and prefixes so that generated servers collide often.
const pool = ['search', 'read', 'x__search', 'a.b', 'a/b', 'write_file', 'ü', '', 'n'.repeat(70)];
const server = (id: string) =>
  fc.record({
    id: fc.constant(id),
    prefix: fc.constantFrom('', '', 'x', 'a', id),
    names: fc.uniqueArray(fc.constantFrom(...pool), { maxLength: pool.length }),
  });
const mode = fc.constantFrom<NameMode>('strict', 'spec');

describe('NameAssigner', () => {
  it('settles a collision among three servers by config order', () => {
    const assigner = new NameAssigner();
    const servers = [
      { id: 'one', prefix: '', names: ['search', 'y__search'] },
      { id: 'two', prefix: '', names: ['search'] },
      { id: 'three', prefix: 'x', names: ['search', 'fetch'] },
      { id: 'four', prefix: 'x', names: ['search'] },
    ];
    const a = assigner.assign('tool', servers);
    expect(a.names.get('one')).toEqual(new Map([['search', 'search'], ['y__search', 'y__search']]));
    expect(a.names.get('two')).toEqual(new Map([['search', `search_${nameHash('two', 'search', 1)}`]]));
    expect(a.names.get('three')).toEqual(
      new Map([
        ['search', 'x__search'],
        ['fetch', 'x__fetch'],
      ]),
    );
    expect(a.names.get('four')).toEqual(new Map([['search', `x__search_${nameHash('four', 'search', 1)}`]]));
    expect(a.renamed).toEqual([
      { server: 'two', kind: 'tool', upstreamName: 'search', hubName: `search_${nameHash('two', 'search', 1)}`, reason: 'collision' },
      { server: 'four', kind: 'tool', upstreamName: 'search', hubName: `x__search_${nameHash('four', 'search', 1)}`, reason: 'collision' },
    ]);
    expectWellFormed(a, servers, 'strict', assigner);
    expect(assigner.resolve('tool', 'search')).toEqual({ server: 'one', upstreamName: 'search' });
    expect(assigner.resolve('tool', 'nope')).toBeUndefined();
  });

  describe("a prefix's space: <prefix>__… names are that server's", () => {
    const squatter = { id: 'one', prefix: '', names: ['x__delete', 'x__', 'x___a__b_', 'plain'] };
    const x = { id: 'x', prefix: 'x', names: ['delete'] };

    it('a server with prefix "" listing x__delete gets a name outside x\'s space, whichever is listed first', () => {
      for (const servers of [[squatter, x], [x, squatter]]) {
        const assigner = new NameAssigner();
        const a = assigner.assign('tool', servers);
        expect(a.names.get('x')!.get('delete')).toBe('x__delete');
        expect(Object.fromEntries(a.names.get('one')!)).toEqual({
          x__delete: `x_delete_${nameHash('one', 'x__delete')}`,
          x__: `x_${nameHash('one', 'x__')}`,
          x___a__b_: `x_a_b_${nameHash('one', 'x___a__b_')}`,
          plain: 'plain',
        });
        expect(a.renamed.filter((r) => r.server === 'one').map((r) => r.reason)).toEqual(['reserved', 'reserved', 'reserved']);
        expect(assigner.resolve('tool', 'x__delete')).toEqual({ server: 'x', upstreamName: 'delete' });
        expectWellFormed(a, servers, 'strict', assigner);
      }
    });

    it('a configured server that is down keeps its space too', () => {
      const a = new NameAssigner().assign('tool', [squatter], [squatter, { id: 'x', prefix: 'x' }]);
      expect(a.names.get('one')!.get('x__delete')).toBe(`x_delete_${nameHash('one', 'x__delete')}`);
      // With no server x configured, x__delete is an ordinary name.
      expect(new NameAssigner().assign('tool', [squatter]).names.get('one')!.get('x__delete')).toBe('x__delete');
    });

    it('a server added later takes its space back from a stored name, and the moved name stays when it leaves', () => {
      const store = new MemoryNameStore();
      expect(new NameAssigner({ store }).assign('tool', [squatter]).names.get('one')!.get('x__delete')).toBe('x__delete');
      const added = new NameAssigner({ store }).assign('tool', [squatter, x]);
      expect(added.names.get('x')!.get('delete')).toBe('x__delete');
      const moved = `x_delete_${nameHash('one', 'x__delete')}`;
      expect(added.names.get('one')!.get('x__delete')).toBe(moved);
      expect(new NameAssigner({ store }).assign('tool', [squatter]).names.get('one')!.get('x__delete')).toBe(moved);
    });

    it('a name an older build gave in another space goes back to that space\'s server, at once or when it is up', () => {
      for (const order of [[squatter, x], [x, squatter]]) {
        const store = new MemoryNameStore();
        store.put('one', 'tool', 'x__delete', 'x__delete');
        store.put('x', 'tool', 'delete', candidateName('x', 'x', 'delete', 'strict', 1).name);
        // While the older squatter is down its squat is no reservation.
        const down = new NameAssigner({ store });
        if (order[0] === x) {
          const a = down.assign('tool', [x], [x, squatter]);
          expect(a.names.get('x')!.get('delete')).toBe('x__delete');
          expect(down.storedOwners('tool', 'x__delete', [x, squatter])).toEqual([{ server: 'x', upstreamName: 'delete' }]);
        }
        const a = new NameAssigner({ store }).assign('tool', order);
        expect(a.names.get('x')!.get('delete')).toBe('x__delete');
        expect(a.names.get('one')!.get('x__delete')).toBe(`x_delete_${nameHash('one', 'x__delete')}`);
      }
    });

    it('a collision name is not taken back from a server that holds the name in its own space', () => {
      const store = new MemoryNameStore();
      new NameAssigner({ store }).assign('tool', [
        { id: 'x', prefix: 'x', names: ['delete'] },
        { id: 'x2', prefix: 'x', names: ['delete'] },
      ]);
      const a = new NameAssigner({ store }).assign('tool', [{ id: 'x2', prefix: 'x', names: ['delete'] }]);
      expect(a.names.get('x2')!.get('delete')).toBe(candidateName('x2', 'x', 'delete', 'strict', 1).name);
    });

    it('a stored name in another space is no owner of it for a call while its server is down', () => {
      const store = new MemoryNameStore();
      store.put('one', 'tool', 'x__delete', 'x__delete');
      const assigner = new NameAssigner({ store });
      expect(assigner.storedOwners('tool', 'x__delete', [squatter])).toEqual([{ server: 'one', upstreamName: 'x__delete' }]);
      expect(assigner.storedOwners('tool', 'x__delete', [squatter, x])).toEqual([]);
    });
  });

  it('reports sanitized and over-long names with their reason', () => {
    const assigner = new NameAssigner({ mode: 'strict' });
    const long = 'n'.repeat(100);
    const a = assigner.assign('tool', [{ id: 'fs', prefix: 'fs', names: ['files.read', long, 'ok'] }]);
    expect(a.renamed.map((r) => [r.upstreamName, r.reason])).toEqual([
      ['files.read', 'sanitized'],
      [long, 'too-long'],
    ]);
    expect(a.names.get('fs')!.get('ok')).toBe('fs__ok');
  });

  it('keeps tools and prompts in separate namespaces', () => {
    const assigner = new NameAssigner();
    const servers = [{ id: 'a', prefix: '', names: ['same'] }];
    assigner.assign('tool', servers);
    assigner.assign('prompt', [{ id: 'b', prefix: '', names: ['same'] }]);
    expect(assigner.resolve('tool', 'same')).toEqual({ server: 'a', upstreamName: 'same' });
    expect(assigner.resolve('prompt', 'same')).toEqual({ server: 'b', upstreamName: 'same' });
  });

  it('ignores a repeated upstream name', () => {
    const a = new NameAssigner().assign('tool', [{ id: 'a', prefix: 'a', names: ['t', 't'] }]);
    expect(a.names.get('a')).toEqual(new Map([['t', 'a__t']]));
    expect(a.renamed).toEqual([]);
  });

  it('reassigns a stored name once the prefix or mode makes it stale', () => {
    const store = new MemoryNameStore();
    new NameAssigner({ store }).assign('tool', [{ id: 'gh', prefix: 'gh', names: ['search', 'a.b'] }]);
    const renamed = new NameAssigner({ store }).assign('tool', [{ id: 'gh', prefix: 'github', names: ['search'] }]);
    expect(renamed.names.get('gh')!.get('search')).toBe('github__search');
    expect(store.get('gh', 'tool', 'search')).toBe('github__search');
    const spec = new NameAssigner({ store, mode: 'spec' }).assign('tool', [{ id: 'gh', prefix: 'gh', names: ['a.b'] }]);
    expect(spec.names.get('gh')!.get('a.b')).toBe('gh__a.b');
  });

  it('ignores a stored name that is not one the server could have been given', () => {
    const store = new MemoryNameStore();
    store.put('a', 'tool', 'search', 'evil__takeover');
    store.put('b', 'tool', 'x', 'bad name!');
    const a = new NameAssigner({ store }).assign('tool', [
      { id: 'a', prefix: 'a', names: ['search'] },
      { id: 'b', prefix: 'b', names: ['x'] },
    ]);
    expect(a.names.get('a')!.get('search')).toBe('a__search');
    expect(a.names.get('b')!.get('x')).toBe('b__x');
  });

  it('keeps its hashes across versions: stored names are checked against them, so a change would rename tools', () => {
    // Known answers, not recomputed: sha256 of `server\0name` (6 hex) and `server\0name\0attempt` (8 hex).
    expect([nameHash('fs', 'files.read'), nameHash('gh', 'repos/list'), nameHash('two', 'search', 1), nameHash('two', 'search', 2)]).toEqual([
      '54b4a7',
      'e0e6cb',
      '02248f10',
      '8980952d',
    ]);
    const a = new NameAssigner().assign('tool', [
      { id: 'one', prefix: '', names: ['search'] },
      { id: 'two', prefix: '', names: ['search'] },
      { id: 'fs', prefix: 'fs', names: ['files.read'] },
    ]);
    expect(a.names.get('two')!.get('search')).toBe('search_02248f10');
    expect(a.names.get('fs')!.get('files.read')).toBe('fs__files_read_54b4a7');
  });

  it('a second collision takes attempt 2', () => {
    const a = new NameAssigner().assign('tool', [
      { id: 'one', prefix: '', names: ['search'] },
      { id: 'x', prefix: '', names: ['search_02248f10'] }, // what "two" would take at attempt 1
      { id: 'two', prefix: '', names: ['search'] },
    ]);
    expect(a.names.get('two')!.get('search')).toBe('search_8980952d');
  });

  it('reports a renamed name it took from the store with its reason, as when it was given', () => {
    const store = new MemoryNameStore();
    const servers = [{ id: 'fs', prefix: 'fs', names: ['files.read', 'ok'] }];
    const first = new NameAssigner({ store }).assign('tool', servers);
    const again = new NameAssigner({ store }).assign('tool', servers);
    expect(again.renamed).toEqual(first.renamed);
    expect(again.renamed).toEqual([{ server: 'fs', kind: 'tool', upstreamName: 'files.read', hubName: 'fs__files_read_54b4a7', reason: 'sanitized' }]);
  });

  it('gives two servers the same stored name never: the first in config order keeps it', () => {
    // "a" had p__t; it left the config, "c" came with the same prefix and got p__t too; "a" is back.
    const store = new MemoryNameStore();
    new NameAssigner({ store }).assign('tool', [{ id: 'a', prefix: 'p', names: ['t'] }]);
    new NameAssigner({ store }).assign('tool', [{ id: 'c', prefix: 'p', names: ['t'] }]);
    expect(store.get('c', 'tool', 't')).toBe('p__t');
    const servers = [
      { id: 'a', prefix: 'p', names: ['t'] },
      { id: 'c', prefix: 'p', names: ['t'] },
    ];
    const assigner = new NameAssigner({ store });
    const back = assigner.assign('tool', servers);
    expect(back.names.get('a')!.get('t')).toBe('p__t');
    expect(back.names.get('c')!.get('t')).toBe(candidateName('c', 'p', 't', 'strict', 1).name);
    expectWellFormed(back, servers, 'strict', assigner);
  });

  it('honours a stored name up to the sixteenth collision attempt, not past it', () => {
    const store = new MemoryNameStore();
    store.put('s', 'tool', 't', candidateName('s', 'p', 't', 'strict', 16).name);
    store.put('s', 'tool', 'u', candidateName('s', 'p', 'u', 'strict', 17).name);
    const a = new NameAssigner({ store }).assign('tool', [{ id: 's', prefix: 'p', names: ['t', 'u'] }]);
    expect(a.names.get('s')!.get('t')).toBe(candidateName('s', 'p', 't', 'strict', 16).name);
    expect(a.names.get('s')!.get('u')).toBe('p__u');
  });

  it('resolves nothing of a kind it has not assigned yet', () => {
    const assigner = new NameAssigner();
    assigner.assign('tool', [{ id: 's', prefix: 's', names: ['t'] }]);
    expect(assigner.resolve('prompt', 's__t')).toBeUndefined();
  });

  it('a store holds each server and kind apart, a server id that starts another included', () => {
    const store = new MemoryNameStore();
    store.put('a', 'tool', 'x', 'a__x');
    store.put('ab', 'tool', 'y', 'ab__y');
    store.put('a', 'prompt', 'z', 'a__z');
    expect(store.held('a', 'tool')).toEqual(['a__x']);
    expect(store.held('ab', 'tool')).toEqual(['ab__y']);
    expect(store.held('a', 'prompt')).toEqual(['a__z']);
    expect(heldIn(new Map(), 'a', 'tool')).toEqual([]);
  });

  it('a store finds the owners of a hub name, and forgets an owner whose name was overwritten', () => {
    const store = new MemoryNameStore();
    store.put('a', 'tool', 'x', 'shared');
    store.put('b', 'tool', 'y', 'shared');
    store.put('a', 'prompt', 'x', 'shared');
    expect(store.owners('tool', 'shared')).toEqual([
      { server: 'a', upstreamName: 'x' },
      { server: 'b', upstreamName: 'y' },
    ]);
    store.put('a', 'tool', 'x', 'a__x_123456');
    store.put('a', 'tool', 'x', 'a__x_123456'); // the same again: no second owner
    expect(store.owners('tool', 'shared')).toEqual([{ server: 'b', upstreamName: 'y' }]);
    expect(store.owners('tool', 'a__x_123456')).toEqual([{ server: 'a', upstreamName: 'x' }]);
    expect(store.owners('prompt', 'shared')).toEqual([{ server: 'a', upstreamName: 'x' }]);
    store.put('b', 'tool', 'y', 'b__y');
    expect(store.owners('tool', 'shared')).toEqual([]);
    expect(store.owners('tool', 'nobody')).toEqual([]);
  });

  it('storedOwners: the servers (of those given) a name is stored for, while it is still their name', () => {
    const store = new MemoryNameStore();
    new NameAssigner({ store }).assign('tool', [
      { id: 'a', prefix: 'x', names: ['echo', 'long'.repeat(20)] },
      { id: 'b', prefix: 'x', names: ['echo'] },
    ]);
    const later = new NameAssigner({ store });
    expect(later.storedOwners('tool', 'x__echo', [{ id: 'a', prefix: 'x' }])).toEqual([{ server: 'a', upstreamName: 'echo' }]);
    // The collision's suffixed name is b's; a renamed (too long) name is found too.
    const bName = store.get('b', 'tool', 'echo')!;
    expect(bName).toMatch(/^x__echo_[0-9a-f]{8}$/);
    expect(later.storedOwners('tool', bName, [{ id: 'a', prefix: 'x' }, { id: 'b', prefix: 'x' }])).toEqual([{ server: 'b', upstreamName: 'echo' }]);
    // A name stored for a tool that could not have it (a stale row) is not an owner's; a name
    // stored for two servers (one took it while the other was away) has both.
    store.put('b', 'tool', 'old', 'x__echo');
    expect(later.storedOwners('tool', 'x__echo', [{ id: 'a', prefix: 'x' }, { id: 'b', prefix: 'x' }])).toEqual([{ server: 'a', upstreamName: 'echo' }]);
    store.put('b', 'tool', 'echo', 'x__echo');
    expect(later.storedOwners('tool', 'x__echo', [{ id: 'a', prefix: 'x' }, { id: 'b', prefix: 'x' }])).toEqual([
      { server: 'a', upstreamName: 'echo' },
      { server: 'b', upstreamName: 'echo' },
    ]);
    store.put('b', 'tool', 'echo', bName);
    const longName = store.get('a', 'tool', 'long'.repeat(20))!;
    expect(later.storedOwners('tool', longName, [{ id: 'a', prefix: 'x' }])).toEqual([{ server: 'a', upstreamName: 'long'.repeat(20) }]);
    // Not among the servers asked about, a prefix changed since, another kind, a name never given.
    expect(later.storedOwners('tool', 'x__echo', [{ id: 'b', prefix: 'x' }])).toEqual([]);
    expect(later.storedOwners('tool', 'x__echo', [{ id: 'a', prefix: 'y' }])).toEqual([]);
    expect(later.storedOwners('prompt', 'x__echo', [{ id: 'a', prefix: 'x' }])).toEqual([]);
    expect(later.storedOwners('tool', 'x__nope', [{ id: 'a', prefix: 'x' }])).toEqual([]);
    // A name valid in 'spec' mode only is not one a 'strict' hub gives.
    store.put('a', 'tool', 'a.b', 'x__a.b');
    expect(new NameAssigner({ store, mode: 'spec' }).storedOwners('tool', 'x__a.b', [{ id: 'a', prefix: 'x' }])).toEqual([{ server: 'a', upstreamName: 'a.b' }]);
    expect(later.storedOwners('tool', 'x__a.b', [{ id: 'a', prefix: 'x' }])).toEqual([]);
  });

  it('is deterministic: two assigners given the same servers agree', () => {
    fc.assert(
      fc.property(fc.tuple(server('a'), server('b'), server('c')), mode, (servers, m) => {
        const x = new NameAssigner({ mode: m });
        const y = new NameAssigner({ mode: m });
        const ax = x.assign('tool', servers);
        expect(y.assign('tool', servers)).toEqual(ax);
        expectWellFormed(ax, servers, m, x);
      }),
    );
  });

  it('never changes a name because a server was added (anywhere) or removed, given the store', () => {
    fc.assert(
      fc.property(
        fc.tuple(server('a'), server('b'), server('c'), server('d')),
        fc.nat(3),
        mode,
        ([A, B, C, D], where, m) => {
          const store = new MemoryNameStore();
          const first = new NameAssigner({ store, mode: m });
          const abc = first.assign('tool', [A, B, C]);
          expectWellFormed(abc, [A, B, C], m, first);

          // Restart (new assigner, same store) with D inserted at any position.
          const withD = [A, B, C];
          withD.splice(where, 0, D);
          const second = new NameAssigner({ store, mode: m });
          const abcd = second.assign('tool', withD);
          expectWellFormed(abcd, withD, m, second);
          // Only a name that lay in D's space (a prefix "" server's "x__search", D's prefix "x") moves.
          const inD = (key: string, hub: string) => D.prefix !== '' && hub.startsWith(`${D.prefix}__`) && prefixOf(withD, key) !== D.prefix;
          for (const [key, hub] of flat(abc)) if (!inD(key, hub)) expect(flat(abcd).get(key)).toBe(hub);

          // Remove B: A, C (and D) keep their names.
          const withoutB = withD.filter((s) => s !== B);
          const third = new NameAssigner({ store, mode: m });
          const acd = third.assign('tool', withoutB);
          expectWellFormed(acd, withoutB, m, third);
          for (const [key, hub] of flat(acd)) expect(hub).toBe(flat(abcd).get(key));
        },
      ),
      { numRuns: 500 },
    );
  });

  it("while a server is away no new name takes one of its own, and no present server's stored name changes", () => {
    fc.assert(
      fc.property(fc.tuple(server('a'), server('b'), server('c'), server('d')), mode, ([A, B, C, D], m) => {
        const store = new MemoryNameStore();
        const before = flat(new NameAssigner({ store, mode: m }).assign('tool', [A, B, C]));
        // B is down; D is new.
        const away = flat(new NameAssigner({ store, mode: m }).assign('tool', [A, C, D], [A, B, C, D]));
        // Only a name that lay in D's space (a prefix "" server's "x__search", D's prefix "x") moves.
        const all = [A, B, C, D];
        const inD = (key: string, hub: string) => D.prefix !== '' && hub.startsWith(`${D.prefix}__`) && prefixOf(all, key) !== D.prefix;
        for (const [key, hub] of away) if (!key.startsWith('d\0') && !inD(key, before.get(key)!)) expect(hub).toBe(before.get(key));
        // (B's own, that is: not one it had in D's space.)
        const bNames = new Set([...before].filter(([k, v]) => k.startsWith('b\0') && !inD(k, v)).map(([, v]) => v));
        for (const [key, hub] of away) if (key.startsWith('d\0')) expect(bNames.has(hub)).toBe(false);
        // B is back: every name as it was (B's own too, unless it lay in D's space).
        const back = flat(new NameAssigner({ store, mode: m }).assign('tool', [A, B, C, D]));
        for (const [key, hub] of before) if (!inD(key, hub)) expect(back.get(key)).toBe(hub);
        for (const [key, hub] of away) expect(back.get(key)).toBe(hub);
      }),
      { numRuns: 500 },
    );
  });

  it('a name an absent server once had, for a tool it dropped, stays with the server that has it now', () => {
    const store = new MemoryNameStore();
    const names = (a: Assignment, id: string) => Object.fromEntries(a.names.get(id) ?? []);
    new NameAssigner({ store }).assign('tool', [{ id: 'a', prefix: '', names: ['x'] }]);
    const moved = new NameAssigner({ store }).assign('tool', [{ id: 'a', prefix: '', names: [] }, { id: 'b', prefix: '', names: ['x'] }]);
    expect(names(moved, 'b')).toEqual({ x: 'x' });
    // a is down now: b keeps x, before and after a is back.
    expect(names(new NameAssigner({ store }).assign('tool', [{ id: 'b', prefix: '', names: ['x'] }], [{ id: 'a', prefix: '' }, { id: 'b', prefix: '' }]), 'b')).toEqual({ x: 'x' });
    expect(names(new NameAssigner({ store }).assign('tool', [{ id: 'a', prefix: '', names: [] }, { id: 'b', prefix: '', names: ['x'] }]), 'b')).toEqual({ x: 'x' });
  });

  it('keeps earlier names when a server is appended, even without a store', () => {
    fc.assert(
      fc.property(fc.tuple(server('a'), server('b'), server('c'), server('d')), mode, ([A, B, C, D], m) => {
        const abc = flat(new NameAssigner({ mode: m }).assign('tool', [A, B, C]));
        const abcd = flat(new NameAssigner({ mode: m }).assign('tool', [A, B, C, D]));
        const inD = (key: string, hub: string) => D.prefix !== '' && hub.startsWith(`${D.prefix}__`) && prefixOf([A, B, C, D], key) !== D.prefix;
        for (const [key, hub] of abc) if (!inD(key, hub)) expect(abcd.get(key)).toBe(hub);
      }),
    );
  });
});
