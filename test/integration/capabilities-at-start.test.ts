/**
 * What the hub says it offers while an upstream is still starting, past the start-up grace: a
 * legacy session keeps the capabilities of its handshake, so a family left out then is never
 * asked for. A server never seen ready counts with the list families; one seen ready in an
 * earlier hub process (the ledger keeps it) with exactly what it offered then (subscriptions,
 * logging, completions); the list families are offered whatever the servers, so a session gets
 * the tools, prompts and resources of a server added later. Real hub, real
 * fixture upstream made slow to start, raw legacy handshakes over loopback HTTP.
 */
import { mkdtempSync } from 'node:fs';
import Database from 'better-sqlite3';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it, type TestContext } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, health, legacySession, modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { setSection } from '../helpers/config-edit.js';

// Tools, and resources with subscribe; no prompts, no completions.
const MUTABLE = join(ROOT, 'test/fixtures/catalog/mutable-server.mjs');
const slow = { command: process.execPath, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), MUTABLE], env: { ERA: 'legacy', START_DELAY_MS: '3000' } };
// The same, unprefixed: any name in no prefix space may be one of its tools.
const config = { servers: { slow, bare: { ...slow, prefix: '' } } };

/**
 * A hub stopped when the test that started it ends: the tests run at once (each mostly waits for
 * a slow start, a crash loop or a reload), so none holds a hub another would stop.
 */
async function hubOf(ctx: TestContext, ...args: Parameters<typeof startHub>): Promise<HubProcess> {
  const hub = await startHub(...args);
  ctx.onTestFinished(async () => void (await hub.stop()));
  return hub;
}

// A short start-up grace (SWITCHYARD_STARTUP_GRACE_MS; 3 s by default), so that a handshake is
// answered while the slow server still starts, well before it is ready.
const GRACE = { env: { SWITCHYARD_STARTUP_GRACE_MS: '300' } };

const handshake = async (url: string) => (await legacySession(url)).init.body?.result?.capabilities;

describe.concurrent('capabilities while an upstream starts', () => {
  it('a first run assumes the list families; a restarted hub answers with what the server offered when last ready', async (ctx) => {
    const { expect } = ctx;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-caps-'));
    let hub = await hubOf(ctx, config, { dir, ...GRACE });
    // Answered after the grace, the server still starting.
    const first = await legacySession(hub.url);
    expect(first.init.body?.result?.capabilities).toEqual({ tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } });
    expect((await health(hub.url)).servers.find((s) => s.id === 'slow')?.state).toBe('starting');
    // A call of a server without prefix: an unknown name may be one of its tools, so it waits (it was
    // "Unknown tool" at once, which the conformance client scenario tools_call showed).
    const bare = await first.request(2, 'tools/call', { name: 'echo', arguments: { text: 'bare' } });
    expect(firstText(bare.body?.result), JSON.stringify(bare.body)).toContain('bare');
    // A call to one of its tools, which no list could show yet, waits for it (it was "Unknown tool").
    const call = await first.request(1, 'tools/call', { name: 'slow__echo', arguments: { text: 'early' } });
    expect(firstText(call.body?.result), JSON.stringify(call.body)).toContain('early');

    await waitForReady(hub.url, ['slow', 'bare']);
    // What it offered (subscribe), and the list families, which are always offered.
    const own = { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true, subscribe: true } };
    expect(await handshake(hub.url)).toEqual(own);
    await hub.stop();

    hub = await hubOf(ctx, config, { dir, ...GRACE });
    expect(await handshake(hub.url)).toEqual(own);
    expect((await health(hub.url)).servers.find((s) => s.id === 'slow')?.state).toBe('starting');
  }, 40_000);

  it('what the ledger kept of a server removed from the config while the hub was down is dropped at the next start', async (ctx) => {
    const { expect } = ctx;
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-caps-'));
    const quick = (uri: string) => ({ command: process.execPath, args: [MUTABLE], env: { ERA: 'legacy', DOC_URI: uri } });
    let hub = await hubOf(ctx, { servers: { a: quick('a://doc'), b: quick('b://doc') } }, { dir });
    await waitForReady(hub.url, ['a', 'b']);
    expect((await modernPost(hub.url, 1, 'resources/list')).body?.result?.resources).toHaveLength(2); // routes stored
    await hub.stop();
    const kept = () => {
      const db = new Database(join(dir, 'ledger.db'), { readonly: true });
      try {
        const servers = (table: string) => (db.prepare(`SELECT DISTINCT server FROM ${table} ORDER BY server`).all() as { server: string }[]).map((r) => r.server);
        return { capabilities: servers('server_capabilities'), routes: servers('resource_routes') };
      } finally {
        db.close();
      }
    };
    expect(kept()).toEqual({ capabilities: ['a', 'b'], routes: ['a', 'b'] });

    hub = await hubOf(ctx, { servers: { a: quick('a://doc') } }, { dir });
    await waitForReady(hub.url, ['a']);
    await hub.stop();
    expect(kept()).toEqual({ capabilities: ['a'], routes: ['a'] });
  }, 40_000);

  // A handshake made while no server could offer tools left them out, and the session never
  // asked for the tools of a server a reload added later (it got -32601 for tools/list); so
  // with prompts and resources, which it still left out once tools were always offered.
  it('offers the list families while no server can, so a session sees the tools, prompts and resources of a server a reload adds', async (ctx) => {
    const { expect } = ctx;
    const hub = await hubOf(ctx, { servers: { broken: { command: join(tmpdir(), 'no-such-mcp-server') } } });
    await expect.poll(async () => (await health(hub.url)).servers[0]?.state, { timeout: 20_000 }).toBe('failed');
    const s = await legacySession(hub.url);
    expect(s.init.body?.result?.capabilities).toEqual({ tools: { listChanged: true }, prompts: { listChanged: true }, resources: { listChanged: true } });
    expect((await s.request(1, 'tools/list')).body?.result).toEqual({ tools: [] });
    expect((await s.request(3, 'prompts/list')).body?.result).toEqual({ prompts: [] });
    setSection(hub, 'servers', { broken: { command: join(tmpdir(), 'no-such-mcp-server') }, added: { command: process.execPath, args: [MUTABLE], env: { ERA: 'legacy' } }, greeter: { command: process.execPath, args: [join(ROOT, 'test/fixtures/servers/sdk1-server.mjs')] } });
    await waitForReady(hub.url, ['added', 'greeter']);
    await expect.poll(async () => (((await s.request(2, 'tools/list')).body?.result?.tools as Json[] | undefined) ?? []).map((t) => t.name), { timeout: 10_000 }).toContain('added__echo');
    expect((((await s.request(4, 'prompts/list')).body?.result?.prompts as Json[] | undefined) ?? []).map((p) => p.name)).toContain('greeter__greet');
  }, 40_000);
});
