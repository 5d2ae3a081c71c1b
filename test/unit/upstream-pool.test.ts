/**
 * Which principals get a connection of their own to an upstream (PrincipalUpstreams.isolated),
 * and which servers may have such connections at all (splits: their main connection's tools
 * list is then not listed at ready, Catalog.listAtReady).
 */
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { PrincipalUpstreams } from '../../src/auth/upstream-pool.js';
import type { ServerHandle } from '../../src/catalog/catalog.js';

const pools: PrincipalUpstreams[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) void p.closeAll();
});

function pool(authRequired: boolean): PrincipalUpstreams {
  const p = new PrincipalUpstreams(
    () => {
      throw new Error('no connection is made here');
    },
    () => ({}) as never,
    authRequired,
    pino({ level: 'silent' }),
  );
  pools.push(p);
  return p;
}

const handle = (config: Record<string, unknown>, era: string | undefined): ServerHandle => ({ id: 's', config: { id: 's', ...config }, upstream: { era } }) as unknown as ServerHandle;

describe('PrincipalUpstreams', () => {
  it('stdio servers are one process for everyone', () => {
    const h = handle({ command: 'node', credentials: { alice: { headers: {} } } }, '2025-11-25');
    expect([pool(true).splits(h), pool(true).isolated(h, 'alice')]).toEqual([false, false]);
  });

  it('an HTTP server with credentials of some principal splits; only those principals get their own', () => {
    const h = handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} } } }, '2026-07-28');
    const p = pool(false);
    expect([p.splits(h), p.isolated(h, 'alice'), p.isolated(h, 'carol')]).toEqual([true, true, false]);
    expect(pool(false).splits(handle({ url: 'http://127.0.0.1:1/mcp', credentials: {} }, '2026-07-28'))).toBe(false);
  });

  it('with authentication on, a server not known to be stateless splits (a legacy session is per user); a modern one does not', () => {
    const legacy = handle({ url: 'http://127.0.0.1:1/mcp' }, '2025-11-25');
    const unknown = handle({ url: 'http://127.0.0.1:1/mcp' }, undefined);
    const modern = handle({ url: 'http://127.0.0.1:1/mcp' }, '2026-07-28');
    expect([pool(true).splits(legacy), pool(true).splits(unknown), pool(true).splits(modern)]).toEqual([true, true, false]);
    expect(pool(false).splits(legacy)).toBe(false);
  });
});

describe('PrincipalUpstreams idle sweep', () => {
  it('closes a connection unused past idleMs, but not one that holds subscriptions (inUse)', async () => {
    const closed: string[] = [];
    const made = (name: string) => ({ start: async () => undefined, close: async () => void closed.push(name), on: () => undefined }) as never;
    let n = 0;
    const names = ['alice', 'bob'];
    const p = new PrincipalUpstreams(
      () => made(names[n++]!),
      () => ({}) as never,
      false,
      pino({ level: 'silent' }),
      { idleMs: 30, inUse: (_server, principal) => principal === 'bob' },
    );
    pools.push(p);
    const h = handle({ url: 'http://127.0.0.1:1/mcp', credentials: { alice: { headers: {} }, bob: { headers: {} } } }, '2025-11-25');
    await p.for(h, 'alice');
    await p.for(h, 'bob');
    expect(p.size).toBe(2);
    await new Promise((r) => setTimeout(r, 150));
    expect(closed).toEqual(['alice']);
    expect(p.size).toBe(1);
  });
});
