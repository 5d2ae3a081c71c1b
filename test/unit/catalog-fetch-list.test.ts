/**
 * A paged list's freshness (src/catalog/fetch-list.ts): each modern page stays fresh for its own
 * ttlMs from when that page arrived (digest §3.2), so a slow later page does not stretch an
 * earlier page's time; the list is stale when its first page goes stale. A fake clock moves while
 * the pages come; the upstream is a stub answering pages (what is tested is the reading of them).
 */
import { describe, expect, it } from 'vitest';
import { MODERN, type Era } from '../../src/protocol/era.js';
import { fetchList, LIST_BYTE_LIMIT, LIST_ITEM_LIMIT, LIST_PAGE_LIMIT, LIST_STALL_PAGES } from '../../src/catalog/fetch-list.js';
import type { Upstream } from '../../src/upstream/types.js';

function pagedUpstream(pages: { ttlMs?: number; takesMs: number; scope?: string }[], clock: { t: number }): Upstream {
  return {
    era: MODERN,
    capabilities: { tools: {} },
    request: async (_method: string, params: { cursor?: string }) => {
      const i = params.cursor === undefined ? 0 : Number(params.cursor);
      const p = pages[i]!;
      clock.t += p.takesMs;
      return {
        resultType: 'complete',
        tools: [{ name: `t${i}` }],
        ...(p.ttlMs === undefined ? {} : { ttlMs: p.ttlMs }),
        cacheScope: p.scope ?? 'public',
        ...(i + 1 < pages.length ? { nextCursor: String(i + 1) } : {}),
      };
    },
  } as unknown as Upstream;
}

describe('fetchList freshness', () => {
  it('counts each page from its own arrival: a slow second page does not stretch the first', async () => {
    const clock = { t: 0 };
    const up = pagedUpstream([{ ttlMs: 1000, takesMs: 10 }, { ttlMs: 60_000, takesMs: 900 }], clock);
    const got = await fetchList(up, 'tools', undefined, () => clock.t);
    expect(got.items.map((t) => t.name)).toEqual(['t0', 't1']);
    // Page 1 arrived at 10 and is fresh until 1010; the list is complete at 910: 100 ms left.
    expect(got.ttlMs).toBe(100);
    expect(got.scope).toBe('public');
  });

  it('takes the page that goes stale first, whichever it is; a page without ttlMs is stale at once; any private page makes the list private', async () => {
    const clock = { t: 0 };
    expect((await fetchList(pagedUpstream([{ ttlMs: 5000, takesMs: 10 }, { ttlMs: 100, takesMs: 10 }], clock), 'tools', undefined, () => clock.t)).ttlMs).toBe(100);
    const noTtl = await fetchList(pagedUpstream([{ ttlMs: 5000, takesMs: 10 }, { takesMs: 10, scope: 'private' }], clock), 'tools', undefined, () => clock.t);
    expect(noTtl).toMatchObject({ ttlMs: 0, scope: 'private' });
    // A page stale before the list is complete: 0, not negative.
    expect((await fetchList(pagedUpstream([{ ttlMs: 50, takesMs: 10 }, { ttlMs: 5000, takesMs: 200 }], clock), 'tools', undefined, () => clock.t)).ttlMs).toBe(0);
    // The config's cacheTtlMs still wins.
    expect((await fetchList(pagedUpstream([{ ttlMs: 50, takesMs: 10 }], clock), 'tools', 7000, () => clock.t)).ttlMs).toBe(7000);
  });
});

describe('fetchList ends a walk that would go round', () => {
  const looping = (nextCursor: string) => {
    const asked: (string | undefined)[] = [];
    const up = {
      era: '2025-11-25',
      capabilities: { tools: {} },
      request: async (_m: string, params: { cursor?: string }) => {
        asked.push(params.cursor);
        // Pages a and b, then b's cursor again: a server that loops.
        return { tools: [{ name: `t${asked.length}` }], nextCursor: params.cursor === undefined ? 'a' : nextCursor };
      },
    } as unknown as Upstream;
    return { up, asked };
  };

  it('an empty nextCursor is a cursor (digest §3.2): sent back once, and the walk ends when it is given again', async () => {
    const { up, asked } = looping('');
    const got = await fetchList(up, 'tools', undefined);
    expect(asked).toEqual([undefined, 'a', '']);
    expect(got.items.map((t) => t.name)).toEqual(['t1', 't2', 't3']);
  });

  it('a nextCursor the walk was given before ends it: one round, not a thousand requests', async () => {
    const { up, asked } = looping('a');
    const got = await fetchList(up, 'tools', undefined);
    expect(asked).toEqual([undefined, 'a']);
    expect(got.items.map((t) => t.name)).toEqual(['t1', 't2']);
  });
});

describe('fetchList freshness of a legacy list', () => {
  const legacy = (hears: boolean | undefined): Upstream =>
    ({
      era: '2025-11-25',
      capabilities: { tools: { listChanged: true } },
      hearsNotifications: hears,
      request: async () => ({ tools: [{ name: 'a' }] }),
    }) as unknown as Upstream;

  it('is "until list_changed" only when the server can say it: a legacy HTTP server without a GET stream gets 30 s', async () => {
    expect((await fetchList(legacy(undefined), 'tools', undefined)).ttlMs).toBe(Infinity); // stdio
    expect((await fetchList(legacy(true), 'tools', undefined)).ttlMs).toBe(Infinity);
    expect((await fetchList(legacy(false), 'tools', undefined)).ttlMs).toBe(30_000);
  });
});

describe('fetchList bounds', () => {
  /** Pages without end, each `n` tools whose descriptions are `pad` characters long. */
  const endless = (n: number, pad: number, asked: { pages: number }): Upstream =>
    ({
      era: MODERN,
      capabilities: { tools: {} },
      request: async (_method: string, params: { cursor?: string }) => {
        const i = params.cursor === undefined ? 0 : Number(params.cursor);
        asked.pages++;
        const tools = Array.from({ length: n }, (_, k) => ({ name: `t${i}_${k}`, description: 'd'.repeat(pad) }));
        return { resultType: 'complete', tools, ttlMs: 0, cacheScope: 'public', nextCursor: String(i + 1) };
      },
    }) as unknown as Upstream;

  it('fails a list of more items than the limit, saying so, having asked for no page past it', async () => {
    const asked = { pages: 0 };
    await expect(fetchList(endless(100, 10, asked), 'tools', undefined)).rejects.toThrow(`tools/list is larger than the hub takes (more than ${LIST_ITEM_LIMIT} items`);
    expect(asked.pages).toBe(LIST_ITEM_LIMIT / 100 + 1);
  });

  it('fails a list whose cursors never end, saying so, having asked for no page past the page limit', async () => {
    const asked = { pages: 0 };
    // One new tool a page, each with a new cursor: neither the item nor the byte limit is reached.
    await expect(fetchList(endless(1, 0, asked), 'tools', undefined)).rejects.toThrow(`tools/list did not end: its server gave a next cursor on each of ${LIST_PAGE_LIMIT} pages`);
    expect(asked.pages).toBe(LIST_PAGE_LIMIT);
  });

  it(`fails a list after ${LIST_STALL_PAGES} pages in a row that bring nothing new, empty or the same items under new cursors`, async () => {
    const empty = { pages: 0 };
    await expect(fetchList(endless(0, 0, empty), 'tools', undefined)).rejects.toThrow(`tools/list did not end: ${LIST_STALL_PAGES} pages in a row brought nothing new`);
    expect(empty.pages).toBe(LIST_STALL_PAGES);
    // The first page again and again, each time under a new cursor (a server going round).
    let asked = 0;
    const round = {
      era: MODERN,
      capabilities: { tools: {} },
      request: async () => ({ resultType: 'complete', tools: [{ name: 'a' }, { name: 'b' }], ttlMs: 0, cacheScope: 'public', nextCursor: `c${++asked}` }),
    } as unknown as Upstream;
    await expect(fetchList(round, 'tools', undefined)).rejects.toThrow(/brought nothing new/);
    expect(asked).toBe(LIST_STALL_PAGES + 1);
    // Empty pages between new items are no stall.
    let i = 0;
    const sparse = {
      era: MODERN,
      capabilities: { tools: {} },
      request: async () => {
        i++;
        return { resultType: 'complete', tools: i % 5 === 0 ? [{ name: `t${i}` }] : [], ttlMs: 0, cacheScope: 'public', ...(i < 100 ? { nextCursor: String(i) } : {}) };
      },
    } as unknown as Upstream;
    expect((await fetchList(sparse, 'tools', undefined)).items).toHaveLength(20);
  });

  it('fails a list larger than the byte limit, however few its items', async () => {
    const asked = { pages: 0 };
    // About 1 MB a page, 10 items each: the byte limit comes long before the item limit.
    const up = endless(10, 100_000, asked);
    const pageChars = JSON.stringify(((await up.request('tools/list', {})) as { tools: unknown[] }).tools).length;
    asked.pages = 0;
    await expect(fetchList(up, 'tools', undefined)).rejects.toThrow(/larger than the hub takes/);
    expect(asked.pages).toBe(Math.floor(LIST_BYTE_LIMIT / pageChars) + 1);
  });
});

describe('fetchList refuses a page that is no list', () => {
  const answering = (page: Record<string, unknown>, era: Era = MODERN) =>
    ({ era, capabilities: { tools: {} }, request: async () => page }) as unknown as Upstream;

  it.each([
    ['no tools array', { resultType: 'complete', ttlMs: 60_000, cacheScope: 'public' }, 'without its tools array'],
    ['tools not an array', { resultType: 'complete', tools: { name: 'x' } }, 'without its tools array'],
    ['an input_required turn', { resultType: 'input_required', tools: [{ name: 'a' }], requestState: 's' }, 'resultType "input_required"'],
    ['a task', { resultType: 'task', tools: [{ name: 'a' }] }, 'resultType "task"'],
    ['an unknown resultType', { resultType: 'partial', tools: [{ name: 'a' }] }, 'resultType "partial"'],
  ])('%s: the walk fails, saying why (the cache then serves the list it had)', async (_what, page, why) => {
    await expect(fetchList(answering(page), 'tools', undefined)).rejects.toThrow(why);
  });

  it('fails a list whose nextCursor is no string (the rest of it would be lost unsaid); a null one is the end', async () => {
    const paged = (nextCursor: unknown): Upstream =>
      ({
        era: '2025-11-25',
        capabilities: { tools: {} },
        request: async (_m: string, params: { cursor?: unknown }) => ({ tools: [{ name: `t${String(params.cursor ?? 0)}` }], ...(params.cursor === undefined ? { nextCursor } : {}) }),
      }) as unknown as Upstream;
    await expect(fetchList(paged(2), 'tools', undefined)).rejects.toThrow('tools/list answered with a nextCursor that is no string (page 1): 2');
    await expect(fetchList(paged({ page: 2 }), 'tools', undefined)).rejects.toThrow(/nextCursor that is no string/);
    expect((await fetchList(paged(null), 'tools', undefined)).items.map((t) => t.name)).toEqual(['t0']);
    expect((await fetchList(paged('2'), 'tools', undefined)).items.map((t) => t.name)).toEqual(['t0', 't2']);
  });

  it('takes a legacy page (no resultType) and an empty list as they are', async () => {
    expect((await fetchList(answering({ tools: [{ name: 'a' }] }, '2025-11-25'), 'tools', undefined)).items).toEqual([{ name: 'a' }]);
    expect((await fetchList(answering({ resultType: 'complete', tools: [] }), 'tools', undefined)).items).toEqual([]);
  });
});
