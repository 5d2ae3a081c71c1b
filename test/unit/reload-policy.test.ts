/**
 * Pure rules of the reliability work: what a config reload changes, a call's timeouts and
 * retry rule, when a tool counts as idempotent, and the id read from an over-long answer.
 */
import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { canonical, describeDiff, diffServers, lostEndpoint, narrowedKeyGroups, reloadableApiKeys, reloadableGroups, reloadablePlugins, reloadablePolicy, restartOnlyChanges } from '../../src/config/reload.js';
import { toolIsIdempotent } from '../../src/router/call-policy.js';
import { callOptions } from '../../src/router/forwarding.js';
import type { ServerHandle } from '../../src/catalog/catalog.js';
import type { CallContext } from '../../src/router/context.js';
import { LineDecoder, responseIdOf } from '../../src/transport/stdio-child.js';

const base = {
  servers: {
    a: { command: 'node', args: ['a.js'] },
    b: { command: 'node', args: ['b.js'] },
    c: { url: 'http://127.0.0.1:9/mcp' },
    d: { command: 'node', args: ['d.js'] },
    off: { command: 'node', enabled: false },
  },
};
const cfg = (doc: unknown) => parseConfig(doc, '/hub/hub.config.json', {});

describe('config reload diff', () => {
  it('sorts servers into added, removed, restarted (connection changed), updated (live keys) and unchanged', () => {
    const next = structuredClone(base) as { servers: Record<string, Record<string, unknown>> };
    delete next.servers.b;
    next.servers.c.headers = { authorization: 'Bearer x' };
    next.servers.d.prefix = 'dd';
    next.servers.d.failMode = 'closed';
    next.servers.e = { command: 'node' };
    next.servers.off.enabled = true;
    const d = diffServers(cfg(base).servers, cfg(next).servers);
    expect(d.added.map((s) => s.id)).toEqual(['off', 'e']);
    expect(d.removed).toEqual(['b']);
    expect(d.restarted.map((s) => s.id)).toEqual(['c']);
    expect(d.updated.map((s) => s.id)).toEqual(['d']);
    expect(d.unchanged).toEqual(['a']);
    // What the reload's log line says.
    expect(describeDiff(d)).toEqual({ added: ['off', 'e'], removed: ['b'], restarted: ['c'], updated: ['d'], disabled: [] });
  });

  it('each live key keeps the connection; each connection key restarts it', () => {
    const changed = (key: string, value: unknown, id: 'a' | 'c' = 'a') => {
      const next = structuredClone(base) as { servers: Record<string, Record<string, unknown>> };
      next.servers[id]![key] = value;
      const d = diffServers(cfg(base).servers, cfg(next).servers);
      return d.updated.some((s) => s.id === id) ? 'updated' : d.restarted.some((s) => s.id === id) ? 'restarted' : 'unchanged';
    };
    const live: [string, unknown][] = [
      ['prefix', 'aa'],
      ['trust', 'trusted'],
      ['tools', { deny: ['x'] }],
      ['cacheTtlMs', 5_000],
      ['failMode', 'closed'],
      ['retry', { maxAttempts: 1, budgetMs: 100 }],
      ['timeoutMs', 1_234],
      ['maxTotalTimeoutMs', 123_456],
      ['autoApprove', true],
      ['healthCheckMs', 5_000],
    ];
    for (const [key, value] of live) expect([key, changed(key, value)]).toEqual([key, 'updated']);
    const connection: [string, unknown, ('a' | 'c')?][] = [
      ['command', 'deno'],
      ['args', ['other.js']],
      ['env', { X: '1' }],
      ['cwd', '/tmp'],
      ['maxConcurrent', 3],
      ['maxQueue', 7],
      ['circuitBreaker', { failures: 2, cooldownMs: 1_000 }],
      ['era', '2025-11-25'],
      ['probeTimeoutMs', 2_345],
      ['maxFrameBytes', 65_536],
      ['url', 'http://127.0.0.1:10/mcp', 'c'],
      ['headers', { 'x-team': 'a' }, 'c'],
      ['credentials', { alice: { headers: { authorization: 'Bearer y' } } }, 'c'],
    ];
    for (const [key, value, id] of connection) expect([key, changed(key, value, id)]).toEqual([key, 'restarted']);
  });

  it('a disabled server counts as removed; key order in the file is no change', () => {
    const next = structuredClone(base) as { servers: Record<string, Record<string, unknown>> };
    next.servers.a = { args: ['a.js'], command: 'node' };
    next.servers.b.enabled = false;
    const d = diffServers(cfg(base).servers, cfg(next).servers);
    expect(d.removed).toEqual(['b']);
    expect(d.unchanged).toEqual(['a', 'c', 'd']);
    expect(canonical({ x: 1, y: [1, { b: 2, a: 1 }] })).toBe(canonical({ y: [1, { a: 1, b: 2 }], x: 1 }));
    // An absent key and one set to undefined are the same config; other shapes stay apart.
    expect(canonical({ a: 1, b: undefined })).toBe(canonical({ a: 1 }));
    expect(canonical([1, 2])).not.toBe(canonical([12]));
    expect(canonical([1, 2])).not.toBe(canonical({ 0: 1, 1: 2 }));
    expect(canonical({ a: 1, b: 2 })).not.toBe(canonical({ a: '1,"b":2' }));
  });

  it('names the hub-level sections a reload cannot change', () => {
    expect(restartOnlyChanges(cfg(base), cfg({ ...base, listen: { port: 1 }, pageSize: 5 }))).toEqual(['listen.port']);
    // named by the key that changed: listen.admin alone is not "listen"
    const admin = cfg({ ...base, listen: { admin: { path: 'admin.sock' } } });
    expect(restartOnlyChanges(cfg(base), admin)).toEqual(['listen.admin']);
    expect(restartOnlyChanges(admin, cfg({ ...base, listen: { admin: { path: 'other.sock' }, port: 2 } }))).toEqual(['listen.admin', 'listen.port']);
    expect(restartOnlyChanges(cfg(base), cfg(base))).toEqual([]);
  });

  it('takes new groups, and the section going away (no restart needed for either)', () => {
    const g = (groups: object | undefined) => cfg({ ...base, groups });
    expect(reloadableGroups(g({ a: { tools: ['x__*'] } }), g({ a: { tools: ['y__*'] }, b: { servers: ['s'] } }))).toEqual({ a: { tools: ['y__*'] }, b: { servers: ['s'] } });
    expect(reloadableGroups(g({ a: { tools: ['x__*'] } }), g(undefined))).toEqual({});
    expect(reloadableGroups(g(undefined), g({}))).toBeUndefined();
    expect(reloadableGroups(g({ a: { tools: ['x'], servers: ['s'] } }), g({ a: { servers: ['s'], tools: ['x'] } }))).toBeUndefined();
    expect(restartOnlyChanges(g({ a: { tools: ['x__*'] } }), g({ a: { tools: ['y__*'] } }))).toEqual([]);
  });

  it('takes new plugins, and the section going away (no restart needed for either)', () => {
    const p = (plugins: object | undefined) => cfg({ ...base, plugins });
    expect(reloadablePlugins(p(undefined), p({ disable: ['redact-secrets'] }))).toEqual({ disable: ['redact-secrets'] });
    expect(reloadablePlugins(p({ options: { x: { a: 1 } } }), p(undefined))).toEqual({});
    expect(reloadablePlugins(p({ options: { x: { a: 1, b: 2 } } }), p({ options: { x: { b: 2, a: 1 } } }))).toBeUndefined();
    expect(restartOnlyChanges(p(undefined), p({ paths: ['x.mjs'] }))).toEqual([]);
  });

  it('takes a new policy, keeping the running request-state settings, which only a restart changes', () => {
    const with_ = (policy: object) => cfg({ ...base, policy });
    const running = with_({ rateLimit: { perPrincipal: { burst: 5, perSecond: 1 } }, requestStateKey: `${'k'.repeat(43)}=`, inputTimeoutMs: 1000 });
    const next = with_({ poisoning: 'block', confirm: ['x__*'], requestStateKey: `${'n'.repeat(43)}=` });
    // (pinning: the schema's default)
    expect(reloadablePolicy(running, next)).toEqual({ pinning: 'block', poisoning: 'block', confirm: ['x__*'], requestStateKey: `${'k'.repeat(43)}=`, inputTimeoutMs: 1000 });
    expect(restartOnlyChanges(running, next)).toEqual(['policy.requestStateKey', 'policy.inputTimeoutMs']);
    // only a request-state setting changed: nothing a reload applies
    expect(reloadablePolicy(running, with_({ rateLimit: { perPrincipal: { burst: 5, perSecond: 1 } }, requestStateKey: `${'n'.repeat(43)}=`, inputTimeoutMs: 1000 }))).toBeUndefined();
    expect(reloadablePolicy(cfg(base), cfg(base))).toBeUndefined();
    expect(reloadablePolicy(cfg(base), with_({ pinning: 'warn' }))).toEqual({ pinning: 'warn', poisoning: 'warn' });
    expect(reloadablePolicy(with_({ pinning: 'warn' }), cfg(base))).toEqual({});
  });

  it('swaps API keys in while authentication stays on, whatever else changed; anything else under auth waits for a restart', () => {
    const h = (c: string) => c.repeat(64);
    const keys = (...k: [string, string][]) => ({ ...base, auth: { apiKeys: k.map(([principal, c]) => ({ principal, sha256: h(c) })) } });
    const withOauth = (k: object) => ({ ...k, auth: { ...(k as { auth: object }).auth, oauth: { issuer: 'https://issuer.test', audience: 'https://hub.test/mcp', jwksUri: 'https://issuer.test/jwks' } } });
    const one = cfg(keys(['alice', 'a']));
    const two = cfg(keys(['alice', 'a'], ['bob', 'b']));
    expect(reloadableApiKeys(one, two)?.map((k) => k.principal)).toEqual(['alice', 'bob']);
    expect(restartOnlyChanges(one, two)).toEqual([]);
    expect(reloadableApiKeys(two, one)?.map((k) => k.principal)).toEqual(['alice']);
    expect(reloadableApiKeys(one, one)).toBeUndefined();
    // the last key may go too (the running hub then refuses everyone until a restart) ...
    expect(reloadableApiKeys(one, cfg(base))).toEqual([]);
    expect(restartOnlyChanges(one, cfg(base))).toEqual([]);
    // ... and come back while the hub still runs with authentication on
    expect(reloadableApiKeys(cfg(base), one, true)?.map((k) => k.principal)).toEqual(['alice']);
    // off → on is a restart
    expect(reloadableApiKeys(cfg(base), one)).toBeUndefined();
    expect(restartOnlyChanges(cfg(base), one)).toEqual(['auth']);
    // the last key may go when OAuth keeps authentication on
    expect(reloadableApiKeys(cfg(withOauth(keys(['alice', 'a']))), cfg(withOauth({ ...base, auth: {} })))).toEqual([]);
    // keys and OAuth changed together: the keys are swapped in, OAuth waits for a restart
    const changed = cfg(withOauth(keys(['bob', 'b'])));
    expect(reloadableApiKeys(one, changed)?.map((k) => k.principal)).toEqual(['bob']);
    expect(restartOnlyChanges(one, changed)).toEqual(['auth']);
    // OAuth alone: nothing to swap in
    expect(reloadableApiKeys(one, cfg(withOauth(keys(['alice', 'a']))))).toBeUndefined();
  });

  it('names the kept keys whose groups left out an endpoint they could use, and what each may still use', () => {
    const k = (principal: string, sha: string, groups?: string[]) => ({ principal, sha256: sha.repeat(64), ...(groups ? { groups } : {}) });
    const before = [k('a', 'a'), k('b', 'b', ['x', 'y']), k('c', 'c', ['x']), k('d', 'd', ['x']), k('e', 'e', ['x'])];
    const after = [k('a', 'a', ['x']), k('b', 'b', ['y']), k('c', 'c', ['x', 'y']), k('moved', 'd', ['y']), k('f', 'f', ['x'])];
    // a: every endpoint → x; b: lost x; c widened, d moved to another principal (revoked whole), e gone, f new: not listed.
    expect(narrowedKeyGroups(before, after)).toEqual(new Map([['a'.repeat(64), new Set(['x'])], ['b'.repeat(64), new Set(['y'])]]));
    const lost = lostEndpoint(new Set(['e'.repeat(64)]), narrowedKeyGroups(before, after));
    expect([lost('a'.repeat(64), undefined), lost('a'.repeat(64), 'x'), lost('b'.repeat(64), 'x'), lost('b'.repeat(64), 'y'), lost('e'.repeat(64), 'x'), lost('c'.repeat(64), 'y'), lost(undefined, 'x')]).toEqual([
      true, false, true, false, true, false, false,
    ]);
  });
});

describe('call policy', () => {
  const server = cfg({ servers: { s: { command: 'node', timeoutMs: 1000, maxTotalTimeoutMs: 5000, retry: { maxAttempts: 4, budgetMs: 700 } } } }).servers.s;
  // The limits, `_meta` and retry rule of a call's options (callOptions), for a caller's `_meta`.
  const callPolicy = (_server: typeof server, meta: Record<string, unknown> | undefined) => {
    const o = callOptions({ clientCapabilities: {}, meta } as unknown as CallContext, { config: _server } as unknown as ServerHandle);
    return { timeoutMs: o.timeoutMs, maxTotalTimeoutMs: o.maxTotalTimeoutMs, meta: o.meta, askProgress: o.askProgress, retry: o.retry };
  };
  it('uses the server limits, lets a caller shorten (not lengthen) the total, and drops the hub key', () => {
    expect(callPolicy(server, undefined)).toEqual({ timeoutMs: 1000, maxTotalTimeoutMs: 5000, meta: undefined, askProgress: true, retry: { maxAttempts: 4, budgetMs: 700, idempotent: false } });
    const short = callPolicy(server, { 'dev.switchyard/timeoutMs': 300, traceparent: 't' });
    expect([short.timeoutMs, short.maxTotalTimeoutMs, short.meta]).toEqual([300, 300, { traceparent: 't' }]);
    expect(callPolicy(server, { 'dev.switchyard/timeoutMs': 60_000 }).maxTotalTimeoutMs).toBe(5000);
    for (const bad of [0, -1, 'x', null, Number.NaN]) expect(callPolicy(server, { 'dev.switchyard/timeoutMs': bad }).maxTotalTimeoutMs).toBe(5000);
  });

  it('a tool is idempotent by the operator config, or by a trusted server own hints; read-only implies it', () => {
    const mk = (extra: Record<string, unknown>) => cfg({ servers: { s: { command: 'n', ...extra } } }).servers.s;
    const claims = { annotations: { idempotentHint: true } };
    expect(toolIsIdempotent(mk({}), 't', claims)).toBe(false);
    expect(toolIsIdempotent(mk({ trust: 'trusted' }), 't', claims)).toBe(true);
    expect(toolIsIdempotent(mk({ trust: 'trusted' }), 't', { annotations: { readOnlyHint: true } })).toBe(true);
    expect(toolIsIdempotent(mk({ trust: 'trusted', tools: { t: { annotations: { idempotentHint: false } } } }), 't', claims)).toBe(false);
    expect(toolIsIdempotent(mk({ tools: { t: { annotations: { idempotentHint: true } } } }), 't', {})).toBe(true);
    expect(toolIsIdempotent(mk({ tools: { t: { annotations: { readOnlyHint: true } } } }), 't', {})).toBe(true);
    expect(toolIsIdempotent(mk({ tools: { other: { annotations: { idempotentHint: true } } } }), 't', {})).toBe(false);
  });
});

describe('the id of an over-long answer', () => {
  it('is read only from a frame that starts the usual way', () => {
    expect(responseIdOf('{"jsonrpc":"2.0","id":7,"result":{"content":[')).toBe(7);
    expect(responseIdOf('{"id":"a\\"b","jsonrpc":"2.0","error":{')).toBe('a"b');
    expect(responseIdOf(' { "jsonrpc" : "2.0" , "id" : -3 , "result" :')).toBe(-3);
    expect(responseIdOf('{"jsonrpc":"2.0","method":"x","params":{"id":5,"result":1}}')).toBeUndefined();
    expect(responseIdOf('{"result":{},"id":4}')).toBeUndefined();
    expect(responseIdOf('{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage"')).toBeUndefined();
    expect(responseIdOf('xxxx')).toBeUndefined();
  });

  it('the line decoder hands over the first bytes of a line it drops, however it was split', () => {
    const got: { bytes: number; head: string }[] = [];
    const lines: string[] = [];
    const d = new LineDecoder(50, (l) => lines.push(l), (bytes, head) => got.push({ bytes, head: head.toString() }));
    const big = `{"jsonrpc":"2.0","id":12,"result":{"t":"${'x'.repeat(100)}"}}`;
    d.push(Buffer.from(big.slice(0, 30)));
    d.push(Buffer.from(big.slice(30, 80)));
    d.push(Buffer.from(big.slice(80) + '\n{"ok":1}\n'));
    expect(got).toHaveLength(1);
    expect(got[0].bytes).toBe(big.length);
    expect(responseIdOf(got[0].head)).toBe(12);
    expect(lines).toEqual(['{"ok":1}']);
    d.push(Buffer.from(big + '\n'));
    expect(responseIdOf(got[1].head)).toBe(12);
  });

  it('is read from the end of a frame whose result comes first (the official SDK writes {result, jsonrpc, id})', () => {
    expect(responseIdOf('{"result":{"content":[', '"}]},"jsonrpc":"2.0","id":9}')).toBe(9);
    expect(responseIdOf('{"jsonrpc":"2.0","error":{"code":1', ',"message":"x"},"id":"r-1"}\r')).toBe('r-1');
    // Not a response (a request's method comes first), or an id of a nested object: unknown.
    expect(responseIdOf('{"method":"sampling/createMessage","params":{', '},"jsonrpc":"2.0","id":4}')).toBeUndefined();
    expect(responseIdOf('{"result":{"items":[', '{"name":"a","id":5}]}}')).toBeUndefined();
    expect(responseIdOf('{"result":{"t":"', 'x\\",\\"id\\":5}"}')).toBeUndefined();
  });

  it('the line decoder hands over the last bytes of a line it drops too, however it was split', () => {
    const got: string[] = [];
    const d = new LineDecoder(50, () => undefined, (_bytes, head, tail) => got.push(String(responseIdOf(head.toString(), tail.toString()))));
    const big = `{"result":{"t":"${'x'.repeat(1000)}"},"jsonrpc":"2.0","id":31}`;
    for (const cuts of [[big.length], [30, 60, big.length - 3], [big.length - 1], [10, 20, 30, 1000, 1010, big.length - 2]]) {
      let at = 0;
      for (const cut of cuts) d.push(Buffer.from(big.slice(at, (at = cut))));
      d.push(Buffer.from(big.slice(at) + '\n'));
    }
    d.push(Buffer.from(`${big}\r\n`));
    expect(got).toEqual(['31', '31', '31', '31', '31']);
  });
});
