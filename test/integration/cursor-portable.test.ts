/**
 * A list cursor names the list's content and is signed with a key derived from the hub's
 * requestState key, so a client paging through `tools/list` goes on where it was after the hub
 * restarts, or when the next page is served by another hub given the same key (several hubs
 * behind a load balancer, no sticky sessions). A hub with another key refuses the cursor.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { fixture, modernCall, SDK1, waitForReady, type Json } from './ledger-helpers.js';
import { PAGE_BYTE_LIMIT } from '../../src/router/page-end.js';

const hubs: HubProcess[] = [];
afterEach(async () => {
  await Promise.all(hubs.splice(0).map((h) => h.stop()));
});

async function hubIn(dir: string, env: NodeJS.ProcessEnv = {}, server: Json = {}): Promise<HubProcess> {
  const hub = await startHub({ servers: { a: fixture(SDK1, dir, { prefix: 'x', ...server }) }, pageSize: 2 }, { dir, env });
  hubs.push(hub);
  await waitForReady(hub.url, ['a']);
  return hub;
}

async function page(url: string, cursor?: string): Promise<{ names: string[]; next?: string; scope?: unknown; error?: { code: number; message: string } }> {
  const a = await modernCall(url, 'list', 'tools/list', cursor === undefined ? {} : { cursor });
  const r = a.body?.result;
  return { names: ((r?.tools ?? []) as Json[]).map((t) => String(t.name)), next: r?.nextCursor as string | undefined, scope: r?.cacheScope, error: a.body?.error };
}

async function everyName(url: string): Promise<string[]> {
  const out: string[] = [];
  let cursor: string | undefined;
  do {
    const p = await page(url, cursor);
    expect(p.error).toBeUndefined();
    out.push(...p.names);
    cursor = p.next;
  } while (cursor);
  return out;
}

describe('list cursors outlive the hub process', () => {
  it('a restarted hub serves the next page of a cursor the hub before it gave', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-cursor-restart-'));
    const first = await hubIn(dir);
    const p1 = await page(first.url);
    expect(p1.names).toHaveLength(2);
    expect(p1.next).toEqual(expect.any(String));
    expect(await first.stop()).toBe(0);
    hubs.splice(0);

    const second = await hubIn(dir);
    const p2 = await page(second.url, p1.next);
    expect(p2.error).toBeUndefined();
    const all = await everyName(second.url);
    expect(all.length).toBeGreaterThan(2);
    expect([...p1.names, ...p2.names]).toEqual(all.slice(0, p1.names.length + p2.names.length));
  }, 40_000);

  it('hubs given the same key take each other\'s cursors; a hub with its own key, or another list, refuses them', async () => {
    const key = randomBytes(32).toString('hex');
    const [a, b, c, d] = await Promise.all([
      hubIn(mkdtempSync(join(tmpdir(), 'switchyard-cursor-a-')), { SWITCHYARD_STATE_KEY: key }),
      hubIn(mkdtempSync(join(tmpdir(), 'switchyard-cursor-b-')), { SWITCHYARD_STATE_KEY: key }),
      hubIn(mkdtempSync(join(tmpdir(), 'switchyard-cursor-c-'))),
      // The same key and server, but one tool fewer: an offset into A's list means nothing here.
      hubIn(mkdtempSync(join(tmpdir(), 'switchyard-cursor-d-')), { SWITCHYARD_STATE_KEY: key }, { tools: { deny: ['add'] } }),
    ]);
    const p1 = await page(a.url);
    const onB = await page(b.url, p1.next);
    expect(onB.error).toBeUndefined();
    expect([...p1.names, ...onB.names]).toEqual((await everyName(b.url)).slice(0, p1.names.length + onB.names.length));
    const refused = { code: -32602, message: 'invalid or expired cursor; list again from the start' };
    expect((await page(c.url, p1.next)).error).toMatchObject(refused);
    expect((await page(d.url, p1.next)).error).toMatchObject(refused);
  }, 40_000);

  it('pages through a list whose upstream reorders it at every fetch (ttlMs 0): each name once, from the list the first page came from', async () => {
    const hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', LIST_TTL_MS: '0', SHUFFLE: '1' }) }, pageSize: 2 });
    hubs.push(hub);
    await waitForReady(hub.url, ['s']);
    const all = await everyName(hub.url);
    expect(all.length).toBeGreaterThan(4);
    expect(new Set(all).size).toBe(all.length);
  }, 40_000);

  it('pages of a kept list show what the hub shows now: a tool removed after the first page is left out', async () => {
    const hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', LIST_TTL_MS: '0', SHUFFLE: '1' }) }, pageSize: 2 });
    hubs.push(hub);
    await waitForReady(hub.url, ['s']);
    const p1 = await page(hub.url);
    const gone = ['leak', 'add', 'echo'].find((t) => !p1.names.includes(`s__${t}`))!;
    const r = await modernCall(hub.url, 'rm', 'tools/call', { name: 's__mutate', arguments: { op: 'remove', name: gone } });
    expect(r.body?.result?.isError).not.toBe(true);
    const rest: string[] = [];
    for (let cursor = p1.next; cursor; ) {
      const p = await page(hub.url, cursor);
      expect(p.error).toBeUndefined();
      rest.push(...p.names);
      cursor = p.next;
    }
    expect(rest).not.toContain(`s__${gone}`);
    expect([...p1.names, ...rest].sort()).toEqual((await everyName(hub.url)).sort());
  }, 40_000);

  it("every page of one list carries its first page's cacheScope; a list gone private since a public first page is listed again (-32602)", async () => {
    // The upstream's scope alternates answer by answer (ttlMs 0): each page's list is another snapshot.
    const hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', LIST_TTL_MS: '0', SCOPE_FLIP: '1' }) }, pageSize: 2 });
    hubs.push(hub);
    await waitForReady(hub.url, ['s']);
    // Private first pages whose walk ends, and public ones refused when the list went private.
    let privateWalks = 0;
    let refused = 0;
    for (let walk = 0; walk < 20 && !(privateWalks && refused); walk++) {
      const first = await page(hub.url);
      let cursor = first.next;
      while (cursor) {
        const p = await page(hub.url, cursor);
        if (p.error) {
          // Only a public list can end so: a private one's pages are served as private.
          expect([first.scope, p.error.code]).toEqual(['public', -32602]);
          refused++;
          break;
        }
        expect(p.scope).toBe(first.scope);
        cursor = p.next;
      }
      if (!cursor && first.scope === 'private') privateWalks++;
      // A first page alone: the next walk starts at the other scope.
      if (first.scope === 'public') await page(hub.url);
    }
    expect([privateWalks > 0, refused > 0]).toEqual([true, true]);
  }, 40_000);

  it('a page holds at most PAGE_BYTE_LIMIT bytes of items, however many pageSize allows: 2.4 MB of tools come in two pages, each tool once', async () => {
    // 60 tools of 40 KB: in one page of the default 1000; a larger list so (12 MB) is a message the SDKs' stdio clients drop (10 MiB is their limit).
    const hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/paging-server.mjs', [], { N: '60', PAGE: '30', PAD: '40000', PAD_META: '1', LIST_TTL_MS: '60000' }) } });
    hubs.push(hub);
    await waitForReady(hub.url, ['s']);
    const names: string[] = [];
    const sizes: number[] = [];
    let cursor: string | undefined;
    do {
      const a = await modernCall(hub.url, 'big', 'tools/list', cursor === undefined ? {} : { cursor });
      const r = a.body!.result!;
      sizes.push(JSON.stringify(r.tools).length);
      names.push(...(r.tools as Json[]).map((t) => String(t.name)));
      cursor = r.nextCursor as string | undefined;
    } while (cursor);
    expect(sizes.length).toBe(2);
    for (const n of sizes) expect(n).toBeLessThanOrEqual(PAGE_BYTE_LIMIT);
    expect(names).toEqual(Array.from({ length: 60 }, (_, i) => `s__i${i}`));
  }, 40_000);

  it('an upstream whose cursor goes back to the start: each tool is listed once, and /healthz counts each once', async () => {
    const hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/paging-server.mjs', [], { N: '10', PAGE: '3', CURSORS: 'restart', LIST_TTL_MS: '60000' }) } });
    hubs.push(hub);
    await waitForReady(hub.url, ['s']);
    const list = await modernCall(hub.url, 'round', 'tools/list');
    expect((list.body!.result!.tools as Json[]).map((t) => String(t.name))).toEqual(Array.from({ length: 10 }, (_, i) => `s__i${i}`));
    const health = (await (await fetch(new URL('/healthz', hub.url))).json()) as { servers: { id: string; tools: number }[] };
    expect(health.servers.find((x) => x.id === 's')?.tools).toBe(10);
  }, 40_000);
});
