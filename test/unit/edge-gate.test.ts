import { describe, expect, it } from 'vitest';
import { Authenticator } from '../../src/auth/authenticator.js';
import { silentLogger } from '../../src/log.js';
import { EdgeGate } from '../../src/policy/gate.js';
import { RateLimiter } from '../../src/policy/rate-limit.js';
import type { AuditBegin, AuditEnd } from '../../src/ledger/types.js';

const call = (id: number) => ({ jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name: 'echo__echo', arguments: {} } });
const facts = { clientAddress: '127.0.0.1', requestBytes: 10, group: undefined, traceparent: undefined };

describe('EdgeGate.admit', () => {
  it('lets a request in at once (no promise, no row); a refusal is a promise that settles once its row is written', async () => {
    const rows: [AuditBegin, AuditEnd][] = [];
    let written!: () => void;
    const auth = new Authenticator(undefined, '.', silentLogger);
    // A clock that stands still: the burst of one is spent by the first call.
    const gate = new EdgeGate(auth, new RateLimiter({ perPrincipal: { burst: 1, perSecond: 1 } }, () => 0), (b, e) => {
      rows.push([b, e]);
      return new Promise<void>((resolve) => (written = resolve));
    });
    const who = await auth.authenticate(() => undefined);
    expect(who.ok).toBe(true);
    if (!who.ok) return;
    const first = gate.admit(who, call(1), facts);
    expect(first).toBeNull();
    expect(rows).toEqual([]);
    const second = gate.admit(who, call(2), facts);
    expect(second).toBeInstanceOf(Promise);
    let settled = false;
    void (second as Promise<unknown>).then(() => (settled = true));
    await new Promise((r) => setImmediate(r));
    expect(settled).toBe(false); // its row is not written yet
    expect(rows.map(([b, e]) => [b.method, b.hubName, e.outcome, e.errorCode])).toEqual([['tools/call', 'echo__echo', 'denied', 429]]);
    written();
    expect(await second).toMatchObject({ status: 429, message: expect.stringContaining('rate limit') });
  });
});

describe("EdgeGate: a renamed tool's base name", () => {
  const renamed = (id: number) => ({ jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name: 'x_delete_0a1b2c', arguments: {} } });

  async function gateWith(limits: ConstructorParameters<typeof RateLimiter>[0], asked: string[]) {
    const auth = new Authenticator(undefined, '.', silentLogger);
    const gate = new EdgeGate(auth, new RateLimiter(limits, () => 0), async () => undefined, undefined, (name) => {
      asked.push(name);
      return name === 'x_delete_0a1b2c' ? { base: 'x__delete', upstream: 'x__delete' } : name === 'gh__delete_repo' ? { upstream: 'delete_repo' } : undefined;
    });
    const who = await auth.authenticate(() => undefined);
    if (!who.ok) throw new Error('no identity');
    return { gate, who };
  }

  it('a rate-limit glob meets the name before the rename; the bucket is the hub name', async () => {
    const asked: string[] = [];
    const { gate, who } = await gateWith({ tools: { '*__delete': { burst: 1, perSecond: 0 } } }, asked);
    expect(await gate.admit(who, renamed(1), facts)).toBeNull();
    expect(await gate.admit(who, renamed(2), facts)).toMatchObject({ status: 429, message: expect.stringContaining('rate limit of x_delete_0a1b2c') });
    expect(asked).toEqual(['x_delete_0a1b2c', 'x_delete_0a1b2c']);
  });

  it('is not looked up when no limit or scope goes by name, nor for a name no rename makes', async () => {
    const asked: string[] = [];
    const byPrincipal = await gateWith({ perPrincipal: { burst: 5, perSecond: 1 } }, asked);
    expect(byPrincipal.gate.admit(byPrincipal.who, renamed(1), facts)).toBeNull();
    const byName = await gateWith({ tools: { '*__delete': { burst: 5, perSecond: 1 } } }, asked);
    expect(byName.gate.admit(byName.who, call(2), facts)).toBeNull();
    expect(asked).toEqual([]);
  });
});

describe('RateLimiter and ToolScopes with a base name', () => {
  it('match a glob by either name, first row wins in table order', async () => {
    const { ToolScopes } = await import('../../src/policy/scopes.js');
    const scopes = new ToolScopes({ '*__delete': 'write', 'x_*': ['x', 'write'] });
    expect(scopes.required('x_delete_0a1b2c')).toEqual(['x', 'write']);
    expect(scopes.required('x_delete_0a1b2c', { base: 'x__delete' })).toEqual(['write', 'x']);
    expect(scopes.required('y_other', { base: 'y__other' })).toEqual([]);
    const limiter = new RateLimiter({ tools: { '*__delete': { burst: 1, perSecond: 0 } } }, () => 0);
    expect(limiter.check('p', 'x_delete_0a1b2c', { base: 'x__delete' })).toEqual({ ok: true });
    expect(limiter.check('p', 'x_delete_0a1b2c', { base: 'x__delete' })).toMatchObject({ ok: false, limit: 'tool' });
    // Without the base name the glob does not meet it (no per-tool default): never limited.
    expect(limiter.check('p', 'x_delete_0a1b2c')).toEqual({ ok: true });
  });
});

describe('RateLimiter and ToolScopes with an upstream name', () => {
  it('a glob without `__` meets the upstream name, as a group\'s deny does; one with it, hub names alone', async () => {
    const { ToolScopes } = await import('../../src/policy/scopes.js');
    const scopes = new ToolScopes({ 'delete_*': 'danger', '*__delete_repo': 'repo', 'x__*': 'x' });
    expect(scopes.readsUpstream).toBe(true);
    expect(scopes.required('gh__delete_repo', { upstream: 'delete_repo' })).toEqual(['danger', 'repo']);
    // A prefix-"" server's own `x__delete_repo` is no tool of server x's: `x__*` does not meet it by its upstream name.
    expect(scopes.required('x_delete_repo_0a1b2c', { upstream: 'x__delete_repo' })).toEqual([]);
    expect(new ToolScopes({ 'x__*': 'x' }).readsUpstream).toBe(false);
    const limiter = new RateLimiter({ tools: { 'delete_*': { burst: 1, perSecond: 0 } } }, () => 0);
    expect(limiter.readsUpstream).toBe(true);
    expect(limiter.check('p', 'gh__delete_repo', { upstream: 'delete_repo' })).toEqual({ ok: true });
    expect(limiter.check('p', 'gh__delete_repo', { upstream: 'delete_repo' })).toMatchObject({ ok: false, limit: 'tool' });
  });
});

describe("EdgeGate: a tool's upstream name", () => {
  const bare = (id: number, name = 'gh__delete_repo') => ({ jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name, arguments: {} } });

  it('a rate-limit glob without `__` meets it: looked up for every call then, and only then', async () => {
    const asked: string[] = [];
    const auth = new Authenticator(undefined, '.', silentLogger);
    const names = (name: string) => {
      asked.push(name);
      return name === 'gh__delete_repo' ? { upstream: 'delete_repo' } : undefined;
    };
    const gate = new EdgeGate(auth, new RateLimiter({ tools: { 'delete_*': { burst: 1, perSecond: 0 } } }, () => 0), async () => undefined, undefined, names);
    const who = await auth.authenticate(() => undefined);
    if (!who.ok) throw new Error('no identity');
    expect(await gate.admit(who, bare(1), facts)).toBeNull();
    expect(await gate.admit(who, bare(2), facts)).toMatchObject({ status: 429, message: expect.stringContaining('rate limit of gh__delete_repo') });
    expect(asked).toEqual(['gh__delete_repo', 'gh__delete_repo']);
    const hubOnly = new EdgeGate(auth, new RateLimiter({ tools: { 'gh__*': { burst: 5, perSecond: 1 } } }, () => 0), async () => undefined, undefined, names);
    expect(hubOnly.admit(who, bare(3), facts)).toBeNull();
    expect(asked).toHaveLength(2);
  });
});

describe("EdgeGate: a bare `*` glob", () => {
  const named = (id: number, name: string) => ({ jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name, arguments: {} } });

  it('matches every hub name already: no call looks its upstream name up for it, while a narrower glob without `__` beside it still does', async () => {
    const asked: string[] = [];
    const auth = new Authenticator(undefined, '.', silentLogger);
    const names = (name: string) => {
      asked.push(name);
      return name === 'gh__delete_repo' ? { upstream: 'delete_repo' } : undefined;
    };
    const who = await auth.authenticate(() => undefined);
    if (!who.ok) throw new Error('no identity');
    const star = new EdgeGate(auth, new RateLimiter({ tools: { '*': { burst: 1, perSecond: 0 } } }, () => 0), async () => undefined, undefined, names);
    expect(star.admit(who, named(1, 'gh__delete_repo'), facts)).toBeNull();
    expect(await star.admit(who, named(2, 'gh__delete_repo'), facts)).toMatchObject({ status: 429 });
    expect(asked).toEqual([]);
    // `delete_*` (first row: first wins) misses the hub name `gh__delete_repo`: its upstream name may meet it, so it is looked up.
    const both = new EdgeGate(auth, new RateLimiter({ tools: { 'delete_*': { burst: 1, perSecond: 0 }, '*': { burst: 5, perSecond: 1 } } }, () => 0), async () => undefined, undefined, names);
    expect(await both.admit(who, named(3, 'gh__delete_repo'), facts)).toBeNull();
    expect(await both.admit(who, named(4, 'gh__delete_repo'), facts)).toMatchObject({ status: 429, message: expect.stringContaining('rate limit of gh__delete_repo') });
    expect(asked).toEqual(['gh__delete_repo', 'gh__delete_repo']);
    // Nor for a name that glob matches itself.
    expect(await both.admit(who, named(5, 'delete_all'), facts)).toBeNull();
    expect(asked).toHaveLength(2);

    const { ToolScopes } = await import('../../src/policy/scopes.js');
    const scopes = new ToolScopes({ '*': 'tools', 'x__*': 'x' });
    expect(scopes.readsUpstream).toBe(true);
    expect(scopes.readsUpstreamOf('gh__delete_repo')).toBe(false);
    expect(new ToolScopes({ '*': 'tools', 'delete_*': 'danger' }).readsUpstreamOf('gh__delete_repo')).toBe(true);
  });
});

describe('ToolScopes: a string of scopes', () => {
  it('is split at its spaces, as a token\'s scope claim is: "files write" is two scopes a token can hold', async () => {
    const { ToolScopes } = await import('../../src/policy/scopes.js');
    const scopes = new ToolScopes({ 'fs__*': 'files write', 'db__*': ['db'] });
    expect(scopes.required('fs__put')).toEqual(['files', 'write']);
    expect(scopes.all()).toEqual(['files', 'write', 'db']);
  });
});
