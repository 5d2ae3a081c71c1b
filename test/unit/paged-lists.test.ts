import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { MAX_KEPT, MAX_KEPT_PER_PRINCIPAL, PAGED_LIST_KEEP_MS, PagedLists } from '../../src/router/paged-lists.js';
import { pageEnd, PAGE_BYTE_LIMIT } from '../../src/router/page-end.js';

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `t${i}` }));

describe('PagedLists', () => {
  it("gives a list back only to the view that was served it: another principal's or group's cursor finds nothing", () => {
    const p = new PagedLists(() => 0);
    const list = items(3);
    p.remember({ principal: 'alice' }, 'tools', 'snap', list, 'public');
    expect(p.recall({ principal: 'alice' }, 'tools', 'snap')?.names).toEqual(['t0', 't1', 't2']);
    expect(p.recall({ principal: 'bob' }, 'tools', 'snap')).toBeUndefined();
    expect(p.recall({ principal: 'alice', group: 'g' }, 'tools', 'snap')).toBeUndefined();
    expect(p.recall({ principal: 'alice' }, 'prompts', 'snap')).toBeUndefined();
  });

  it('forgets a list not paged for PAGED_LIST_KEEP_MS; each page served keeps it longer', () => {
    let now = 0;
    const p = new PagedLists(() => now);
    p.remember({}, 'tools', 's', items(2), 'public');
    now = PAGED_LIST_KEEP_MS - 1;
    expect(p.recall({}, 'tools', 's')).toBeDefined();
    now += PAGED_LIST_KEEP_MS - 1;
    expect(p.recall({}, 'tools', 's')).toBeDefined();
    now += PAGED_LIST_KEEP_MS;
    expect(p.recall({}, 'tools', 's')).toBeUndefined();
  });

  it(`keeps at most ${MAX_KEPT} lists, the least recently served going first`, () => {
    const p = new PagedLists(() => 0);
    const who = (i: number) => ({ principal: `p${i % 32}` });
    for (let i = 0; i <= MAX_KEPT; i++) p.remember(who(i), 'tools', `s${i}`, items(1), 'public');
    expect(p.recall(who(0), 'tools', 's0')).toBeUndefined();
    expect(p.recall(who(1), 'tools', 's1')).toBeDefined();
    expect(p.recall(who(MAX_KEPT), 'tools', `s${MAX_KEPT}`)).toBeDefined();
  });

  it(`keeps at most ${MAX_KEPT_PER_PRINCIPAL} lists of one principal: its own least recently served go, nobody else's`, () => {
    const p = new PagedLists(() => 0);
    p.remember({ principal: 'alice' }, 'tools', 'a', items(1), 'public');
    p.remember({}, 'tools', 'anon', items(1), 'public');
    // bob's upstream reorders at every fetch: each first page is a new snapshot.
    for (let i = 0; i < 10 * MAX_KEPT; i++) p.remember({ principal: 'bob' }, 'tools', `b${i}`, items(1), 'public');
    expect(p.recall({ principal: 'alice' }, 'tools', 'a')).toBeDefined();
    expect(p.recall({}, 'tools', 'anon')).toBeDefined();
    const bobs = Array.from({ length: 10 * MAX_KEPT }, (_, i) => p.recall({ principal: 'bob' }, 'tools', `b${i}`) !== undefined);
    expect(bobs.filter(Boolean)).toHaveLength(MAX_KEPT_PER_PRINCIPAL);
    expect(bobs.slice(-MAX_KEPT_PER_PRINCIPAL).every(Boolean)).toBe(true);
    // A list served again is the most recent again.
    p.remember({ principal: 'bob' }, 'tools', `b${10 * MAX_KEPT - MAX_KEPT_PER_PRINCIPAL}`, items(1), 'public');
    p.remember({ principal: 'bob' }, 'tools', 'bnew', items(1), 'public');
    expect(p.recall({ principal: 'bob' }, 'tools', `b${10 * MAX_KEPT - MAX_KEPT_PER_PRINCIPAL}`)).toBeDefined();
    expect(p.recall({ principal: 'bob' }, 'tools', `b${10 * MAX_KEPT - MAX_KEPT_PER_PRINCIPAL + 1}`)).toBeUndefined();
  });

  it('keeps the names of a list, not its items: an old aggregate is not held for as long as its cursor lives', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const p = new PagedLists(() => 0);
    let list: Record<string, unknown>[] | undefined = items(3).map((t) => ({ ...t, description: 'd'.repeat(1000) }));
    const item = new WeakRef(list[1]!);
    p.remember({}, 'tools', 's', list, 'public');
    list = undefined;
    // A WeakRef's target lives at least to the end of the turn that made it.
    await new Promise((r) => setImmediate(r));
    gc();
    expect(item.deref()).toBeUndefined();
    expect(p.recall({}, 'tools', 's')?.names).toEqual(['t0', 't1', 't2']);
    // Resources and templates are named by their URI and uriTemplate.
    p.remember({}, 'resources', 'r', [{ uri: 'a://1', name: 'one' }], 'public');
    p.remember({}, 'resourceTemplates', 't', [{ uriTemplate: 'a://{x}', name: 'any' }], 'public');
    expect(p.recall({}, 'resources', 'r')?.names).toEqual(['a://1']);
    expect(p.recall({}, 'resourceTemplates', 't')?.names).toEqual(['a://{x}']);
  });
});

describe('pageEnd', () => {
  /** Items whose JSON is `bytes` long each (as UTF-8). */
  const sized = (n: number, bytes: number) => Array.from({ length: n }, (_, i) => ({ name: `t${i}`, d: 'x'.repeat(bytes - JSON.stringify({ name: `t${i}`, d: '' }).length) }));

  it('ends a page at pageSize items, or before the item that would take it past the byte limit', () => {
    const small = sized(10, 100);
    expect(pageEnd(small.length, 0, 4, (i) => small[i])).toBe(4);
    expect(pageEnd(small.length, 8, 4, (i) => small[i])).toBe(10);
    // Items of 1 MiB: PAGE_BYTE_LIMIT / 1 MiB fit (with their commas, one more does not).
    const big = sized(12, 1024 * 1024 - 1);
    expect(pageEnd(big.length, 0, 1000, (i) => big[i])).toBe(PAGE_BYTE_LIMIT / (1024 * 1024));
    expect(pageEnd(big.length, 11, 1000, (i) => big[i])).toBe(12);
    // Non-ASCII counts as the bytes it is sent as.
    const wide = [{ name: 'é'.repeat(600) }, { name: 'é'.repeat(600) }];
    expect(pageEnd(2, 0, 10, (i) => wide[i], 2000)).toBe(1);
  });

  it('never ends a page before its first item: one larger than the limit is a page of its own', () => {
    const huge = sized(3, 5 * 1024 * 1024);
    expect(pageEnd(3, 0, 1000, (i) => huge[i])).toBe(1);
    expect(pageEnd(3, 1, 1000, (i) => huge[i])).toBe(2);
    // Places whose item is gone take no room, and do not count as the first item.
    const some = [undefined, undefined, huge[0], huge[1]];
    expect(pageEnd(4, 0, 1000, (i) => some[i])).toBe(3);
  });
});
