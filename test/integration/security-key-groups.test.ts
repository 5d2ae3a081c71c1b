/**
 * An API key limited to tool groups (`auth.apiKeys[].groups`) uses those groups' endpoints
 * alone: `/mcp`, another group's endpoint and the operator routes refuse it (403, audited), and
 * `/healthz` names only its groups' servers. Without it a group was a view, not a boundary: any
 * key could use `/mcp`. The real built hub, two fixture upstreams, raw HTTP.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { sha256Hex } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, modernMeta, post, streamWatchingFetch, type Json } from '../helpers/wire.js';
import { queryRows, SDK1, SDK2, waitForRows, type Row } from './ledger-helpers.js';

const ALICE = 'sy_alice-keygroups-key-0123456789abcdefghijklmnopq';
const BOB = 'sy_bob-keygroups-key-0123456789abcdefghijklmnopqrst';
/** Limited to a group, and given the admin scope all the same. */
const DANA = 'sy_dana-keygroups-key-0123456789abcdefghijklmnopqrs';
/** Limited to both groups, then to one by a reload. */
const ERIN = 'sy_erin-keygroups-key-0123456789abcdefghijklmnopqrs';
/** Limited to a group that shows one tool of its server. */
const FRANK = 'sy_frank-keygroups-key-0123456789abcdefghijklmnopqr';
/** One principal's two keys, each limited to another group (both show a__echo). */
const GINA_SMALL = 'sy_gina-small-keygroups-key-0123456789abcdefghijklm';
const GINA_NARROW = 'sy_gina-narrow-keygroups-key-0123456789abcdefghijkl';

describe('an API key limited to tool groups', () => {
  let hub: HubProcess;
  let n = 0;
  beforeAll(async () => {
    const apiKeys = [
      { principal: 'alice', sha256: sha256Hex(ALICE), scopes: ['switchyard:admin'] },
      { principal: 'bob', sha256: sha256Hex(BOB), groups: ['small'] },
      { principal: 'dana', sha256: sha256Hex(DANA), groups: ['small'], scopes: ['switchyard:admin'] },
      { principal: 'erin', sha256: sha256Hex(ERIN), groups: ['small', 'other'] },
      { principal: 'frank', sha256: sha256Hex(FRANK), groups: ['narrow'] },
      { principal: 'gina', sha256: sha256Hex(GINA_SMALL), groups: ['small'] },
      { principal: 'gina', sha256: sha256Hex(GINA_NARROW), groups: ['narrow'] },
    ];
    hub = await startHub({
      auth: { apiKeys },
      groups: { small: { servers: ['a'] }, other: { servers: ['b'] }, narrow: { servers: ['a'], tools: ['a__echo', 'a__fail'], deny: ['a__fail'] } },
      servers: { a: nodeServer(SDK1), b: nodeServer(SDK2) },
    });
    const ready = async () => ((await (await fetch(new URL('/healthz', hub.url), { headers: { authorization: `Bearer ${ALICE}` } })).json()) as { servers: Json[] }).servers.every((s) => s.state === 'ready');
    for (let i = 0; i < 200 && !(await ready()); i++) await new Promise((r) => setTimeout(r, 50));
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const call = (path: string, key: string, method = 'tools/list') =>
    post(`${new URL(hub.url).origin}${path}`, modernBody(`r${++n}`, method), { ...modernHeaders(method), authorization: `Bearer ${key}` });
  const get = async (path: string, key: string) => {
    const r = await fetch(new URL(path, hub.url), { headers: { authorization: `Bearer ${key}` } });
    return { status: r.status, body: (await r.json()) as Json };
  };

  it('uses its groups alone: /mcp, another group and the operator routes refuse it; healthz names its servers only', async () => {
    const own = await call('/mcp/small', BOB);
    expect(own.status).toBe(200);
    expect(((own.body?.result?.tools as Json[]) ?? []).every((t) => String(t.name).startsWith('a__'))).toBe(true);
    for (const path of ['/mcp', '/mcp/other']) {
      const r = await call(path, BOB);
      expect(r.status, path).toBe(403);
      expect(r.body?.error?.message).toBe('Forbidden: this API key may use only /mcp/small');
    }
    for (const path of ['/metrics', '/admin/servers']) expect((await get(path, BOB)).status, path).toBe(403);
    expect(((await get('/healthz', BOB)).body.servers as Json[]).map((s) => s.id)).toEqual(['a']);

    // Another key is not limited.
    expect((await call('/mcp', ALICE)).status).toBe(200);
    expect(((await get('/healthz', ALICE)).body.servers as Json[]).map((s) => s.id).sort()).toEqual(['a', 'b']);
    // The refusals are audited, under bob.
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { principal: 'bob' }, (r) => r.filter((x) => x.errorMessage?.startsWith('Forbidden')).length >= 2);
    expect(rows.filter((x) => x.errorMessage?.startsWith('Forbidden')).length).toBe(2);
  });

  it("counts in /healthz only the tools its groups show, not its servers' whole lists", async () => {
    const listed = await call('/mcp/narrow', FRANK);
    expect(((listed.body?.result?.tools as Json[]) ?? []).map((t) => t.name)).toEqual(['a__echo']);
    const mine = (await get('/healthz', FRANK)).body.servers as Json[];
    expect(mine.map((s) => [s.id, s.tools])).toEqual([['a', 1]]);
    // A key of the whole hub counts the server's own list.
    const all = (await get('/healthz', ALICE)).body.servers as Json[];
    expect(all.find((s) => s.id === 'a')!.tools as number).toBeGreaterThan(1);
  });

  it('each row names the group whose endpoint the request came through, refusals too; `ledger query --group` finds them', async () => {
    const db = join(hub.dir, 'ledger.db');
    const echo = (path: string, key: string, id: string) =>
      post(`${new URL(hub.url).origin}${path}`, modernBody(id, 'tools/call', { name: 'a__echo', arguments: { text: id } }), { ...modernHeaders('tools/call', 'a__echo'), authorization: `Bearer ${key}` });
    expect((await echo('/mcp/small', BOB, 'grp-small')).body?.result).toBeDefined();
    expect((await echo('/mcp', ALICE, 'grp-all')).body?.result).toBeDefined();
    // Refused by the router (group `other` shows no a__echo), and at the edge before routing (bob may not use `other`).
    expect((await echo('/mcp/other', ALICE, 'grp-other')).body?.error).toBeDefined();
    expect((await echo('/mcp/other', BOB, 'grp-forbidden')).status).toBe(403);
    // And before any credential was accepted (its body unread, so no request id).
    expect((await echo('/mcp/small', 'sy_not-a-key-of-this-hub-0123456789abcdefghijklmnop', 'grp-nokey')).status).toBe(401);
    // Every row once they are all in (one CLI run while waiting), then `--group small` alone.
    const byId = (rows: Row[], id: string) => rows.find((x) => x.requestId === id);
    const all = await waitForRows(db, {}, (r) => byId(r, 'grp-small')?.outcome === 'ok' && byId(r, 'grp-other') !== undefined && byId(r, 'grp-all') !== undefined && r.some((x) => x.principal === '(unauthenticated)'));
    expect(byId(all, 'grp-all')?.group).toBeNull();
    // Both refusals on /mcp/other name that group (the edge's read no body: no request id).
    expect(all.filter((x) => x.group === 'other' && x.method === 'tools/call').map((x) => [x.principal, x.outcome, x.requestId])).toEqual([
      ['alice', 'rpc_error', 'grp-other'],
      ['bob', 'denied', ''],
    ]);
    const small = await queryRows(db, { group: 'small' });
    expect(small.every((x) => x.group === 'small')).toBe(true);
    expect(byId(small, 'grp-small')).toMatchObject({ principal: 'bob', tool: 'a__echo', server: 'a', outcome: 'ok' });
    expect(small.find((x) => x.principal === '(unauthenticated)')).toMatchObject({ method: 'tools/call', outcome: 'denied', errorCode: 401 });
  });

  it("an idempotency key is its principal's on one endpoint: another group's (or /mcp's) use of it neither refuses nor replays there", async () => {
    const keyed = (path: string, id: string, name: string, text: string) =>
      post(`${new URL(hub.url).origin}${path}`, modernBody(id, 'tools/call', { name, arguments: { text } }, { ...modernMeta(), 'dev.switchyard/idempotency-key': 'shared-key' }), {
        ...modernHeaders('tools/call', name),
        authorization: `Bearer ${ALICE}`,
      });
    // Used on /mcp for b__echo, which group `small` does not show.
    expect((await keyed('/mcp', 'idem-1', 'b__echo', 'x')).body?.result?.isError).toBeFalsy();
    const textOf = (r: Awaited<ReturnType<typeof keyed>>) => String(((r.body?.result?.content as Json[] | undefined)?.[0] as Json | undefined)?.text);
    // On /mcp/small the key is another: the call runs (it was refused as "used for another tool").
    expect(textOf(await keyed('/mcp/small', 'idem-2', 'a__echo', 'x'))).toBe('echo:x');
    // A name the group has not is unknown there, key or not.
    expect((await keyed('/mcp/small', 'idem-3', 'nothing__here', 'x')).body?.error?.message).toBe('Unknown tool: nothing__here');
    // On the endpoint that used it, the refusal names the tool, as before.
    expect(textOf(await keyed('/mcp', 'idem-4', 'a__echo', 'x'))).toBe('idempotency key "shared-key" was already used for tool "b__echo"; use a new key');
    // And on /mcp/other, which shows b__echo, other arguments run too (they were refused).
    expect(textOf(await keyed('/mcp/other', 'idem-5', 'b__echo', 'y'))).not.toMatch(/idempotency key/);
  });

  // A principal's API keys limited to different groups: the groups are an authorization
  // boundary, and one key's idempotency keys replayed (or refused) the other's calls across it.
  it("one principal's keys of two groups keep their idempotency keys apart: neither replays nor refuses the other's call", async () => {
    const echo = (path: string, bearer: string, id: string, key: string, text: string) =>
      post(`${new URL(hub.url).origin}${path}`, modernBody(id, 'tools/call', { name: 'a__echo', arguments: { text } }, { ...modernMeta(), 'dev.switchyard/idempotency-key': key }), {
        ...modernHeaders('tools/call', 'a__echo'),
        authorization: `Bearer ${bearer}`,
      });
    const textOf = (r: Awaited<ReturnType<typeof echo>>) => String(((r.body?.result?.content as Json[] | undefined)?.[0] as Json | undefined)?.text);
    // The same key with other arguments through the other group runs (it was refused there).
    expect(textOf(await echo('/mcp/small', GINA_SMALL, 'gina-1', 'gina-k1', 'one'))).toBe('echo:one');
    expect(textOf(await echo('/mcp/narrow', GINA_NARROW, 'gina-2', 'gina-k1', 'two'))).toBe('echo:two');
    // The same call with the same key through the other group runs too (it was replayed there);
    // sent again through one group, it is replayed there as ever.
    expect(textOf(await echo('/mcp/small', GINA_SMALL, 'gina-3', 'gina-k2', 'same'))).toBe('echo:same');
    expect(textOf(await echo('/mcp/narrow', GINA_NARROW, 'gina-4', 'gina-k2', 'same'))).toBe('echo:same');
    expect(textOf(await echo('/mcp/narrow', GINA_NARROW, 'gina-5', 'gina-k2', 'same'))).toBe('echo:same');
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { principal: 'gina' }, (r) => r.filter((x) => x.outcome !== 'in_flight').length >= 5);
    const outcome = (id: string) => rows.find((x) => x.requestId === id)?.outcome;
    expect(['gina-1', 'gina-2', 'gina-3', 'gina-4', 'gina-5'].map(outcome)).toEqual(['ok', 'ok', 'ok', 'ok', 'replayed']);
    // `ledger keys` tells them apart by group.
    const keys = await runCli(['ledger', '--db', join(hub.dir, 'ledger.db'), 'keys', '--principal', 'gina', '--key', 'gina-k2', '--json']);
    expect(keys.stdout.trim().split('\n').map((l) => (JSON.parse(l) as Json).group).sort()).toEqual(['narrow', 'small']);
  });

  it("a key's kept answer is not replayed on a group's endpoint that does not show its tool", async () => {
    const keyed = (path: string, id: string) =>
      post(`${new URL(hub.url).origin}${path}`, modernBody(id, 'tools/call', { name: 'b__echo', arguments: { text: 'kept' } }, { ...modernMeta(), 'dev.switchyard/idempotency-key': 'kept-key' }), {
        ...modernHeaders('tools/call', 'b__echo'),
        authorization: `Bearer ${ALICE}`,
      });
    expect((await keyed('/mcp', 'kept-1')).body?.result?.content).toBeDefined();
    // The same call again on /mcp/small, which does not show b__echo: unknown there, as without the key.
    const small = await keyed('/mcp/small', 'kept-2');
    expect(small.body?.result).toBeUndefined();
    expect(small.body?.error?.message).toBe('Unknown tool: b__echo');
    // Where the tool is shown, the call runs (the key is /mcp's, not /mcp/other's).
    expect((await keyed('/mcp/other', 'kept-3')).body?.result?.content).toBeDefined();
  });

  it('with the admin scope too, it opens neither the operator routes nor the live feed', async () => {
    for (const path of ['/metrics', '/admin/servers']) expect((await get(path, DANA)).status, path).toBe(403);
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(new URL(hub.url).origin.replace('http', 'ws') + '/admin/events', { headers: { authorization: `Bearer ${DANA}` } });
      ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
      ws.on('open', () => (ws.close(), resolve(101)));
      ws.on('error', () => undefined);
    });
    expect(status).toBe(403);
  });

  it('a reload that takes a group from a key ends what the key holds open there; its other group goes on', async () => {
    const origin = new URL(hub.url).origin;
    // Connected once its GET stream, opened after initialize, is open too.
    const legacy = async (group: string) => {
      const c = new Client({ name: `erin-${group}`, version: '1.0.0' });
      const watch = streamWatchingFetch();
      await c.connect(new StreamableHTTPClientTransport(new URL(`${origin}/mcp/${group}`), { fetch: watch.fetch, requestInit: { headers: { authorization: `Bearer ${ERIN}` } } }));
      await watch.streamOpen;
      return c;
    };
    const [kept, lost] = [await legacy('small'), await legacy('other')];
    const modern = new ClientV2({ name: 'erin-listen', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await modern.connect(new TransportV2(new URL(`${origin}/mcp/other`), { requestInit: { headers: { authorization: `Bearer ${ERIN}` } } }));
    const sub = await modern.listen({ toolsListChanged: true });
    try {
      const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { auth: { apiKeys: { principal: string; groups?: string[] }[] } };
      config.auth.apiKeys.find((k) => k.principal === 'erin')!.groups = ['small'];
      writeFileSync(hub.configFile, JSON.stringify(config));
      expect(await Promise.race([sub.closed, new Promise((r) => setTimeout(() => r('still open'), 5_000))])).toBe('graceful');
      const ended = () => hub.logs.find((l) => l.includes('sessions and streams of revoked credentials ended'));
      await expect.poll(ended, { timeout: 5_000, interval: 20 }).toBeDefined();
      expect(JSON.parse(ended()!)).toMatchObject({ sessions: 1, listenStreams: 1 });
      expect((await kept.listTools()).tools.every((t) => t.name.startsWith('a__'))).toBe(true);
      expect((await call('/mcp/other', ERIN)).status).toBe(403);
    } finally {
      await Promise.all([kept.close(), lost.close(), modern.close()]);
    }
  });

  it('keys add --group names groups the config has, and refuses one it has not', async () => {
    const bad = await runCli(['keys', 'add', 'carol', '--group', 'nope', '--config', hub.configFile]);
    expect([bad.code, bad.stdout]).toEqual([2, '']);
    expect(bad.stderr).toContain('no tool group named "nope" (small, other, narrow)');
    const ok = await runCli(['keys', 'add', 'carol', '--group', 'small', '--config', hub.configFile]);
    expect(ok.code, ok.stderr).toBe(0);
    const list = await runCli(['keys', 'list', '--config', hub.configFile]);
    expect(list.stdout).toMatch(/^carol\t[0-9a-f]{12}…\tgroups: small$/m);
  });

  it('a fail-closed server outside its groups that is down: healthz and its calls say the hub refuses, not which server nor why', async () => {
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { servers: Record<string, Json> };
    config.servers.guard = { command: process.execPath, args: ['-e', 'process.exit(3)'], failMode: 'closed' };
    writeFileSync(hub.configFile, JSON.stringify(config));
    try {
      // The operator sees which server, and why.
      await expect.poll(async () => (await get('/healthz', ALICE)).body.reason, { timeout: 10_000, interval: 50 }).toMatch(/server "guard" \(failMode "closed"\) is \w+/);
      const hz = await get('/healthz', BOB);
      expect(hz.status).toBe(503);
      expect(hz.body).toMatchObject({ status: 'refusing', reason: expect.stringMatching(/refuses calls while a server it depends on/) });
      expect(JSON.stringify(hz.body)).not.toContain('guard');
      const refused = await post(`${new URL(hub.url).origin}/mcp/small`, modernBody(`r${++n}`, 'tools/call', { name: 'a__echo', arguments: { text: 'x' } }), {
        ...modernHeaders('tools/call', 'a__echo'),
        authorization: `Bearer ${BOB}`,
      });
      expect(refused.body?.result?.isError).toBe(true);
      expect(JSON.stringify(refused.body)).not.toMatch(/guard|code 3/);
    } finally {
      delete config.servers.guard;
      writeFileSync(hub.configFile, JSON.stringify(config));
    }
  });
});
