/**
 * A burst of list changes from many servers at once (a reload that restarts every server, a hub
 * start) reaches each client as a few notifications, not one per server and change: clients
 * list again at each one. A client of a group is still told when a server it shows changed.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const SERVERS = 12;
const tools = JSON.stringify([{ name: 'echo', description: 'echo', inputSchema: { type: 'object' } }]);
const servers = (tag: string) =>
  Object.fromEntries(Array.from({ length: SERVERS }, (_, i) => [`s${i}`, nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS: tools, TAG: tag })]));

async function allReady(hub: HubProcess, restarts: number): Promise<void> {
  const end = Date.now() + 40_000;
  while (Date.now() < end) {
    const h = (await (await fetch(new URL('/healthz', hub.url))).json()) as { servers: { state: string; restarts: number }[] };
    if (h.servers.every((s) => s.state === 'ready' && s.restarts >= restarts)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('servers not ready in time');
}

async function listening(url: string): Promise<{ told: number[]; close: () => Promise<void> }> {
  const c = new ClientV1({ name: 'burst', version: '1.0.0' });
  const told: number[] = [];
  c.setNotificationHandler(ToolListChangedNotificationSchema, () => void told.push(Date.now()));
  await c.connect(new TransportV1(new URL(url)));
  await c.listTools();
  return { told, close: () => c.close() };
}

describe('a burst of list changes across many servers', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ groups: { solo: { servers: ['s0'] } }, servers: servers('one') });
    await allReady(hub, 0);
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  it('a reload restarting every server tells each client a few times, and a group client of one of them too', async () => {
    const all = await listening(hub.url);
    const solo = await listening(`${hub.url}/solo`);
    await new Promise((r) => setTimeout(r, 300)); // the GET streams open after initialize
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8'));
    config.servers = servers('two');
    writeFileSync(hub.configFile, JSON.stringify(config));
    const r = await runCli(['reload', '--url', hub.url]);
    expect(r.code, r.stderr).toBe(0);
    await allReady(hub, 0);
    const tagged = async () => {
      const c = new ClientV1({ name: 'check', version: '1.0.0' });
      await c.connect(new TransportV1(new URL(hub.url)));
      const res = await c.callTool({ name: 's11__echo', arguments: { text: 'x' } });
      await c.close();
      return JSON.stringify(res.content);
    };
    expect(await tagged()).toMatch(/two/); // every server runs with the new config
    await new Promise((r) => setTimeout(r, 1000)); // the last window ends
    // 12 servers going and coming: before, one notification per server and change (24 or so).
    expect(all.told.length).toBeGreaterThanOrEqual(1);
    expect(all.told.length).toBeLessThanOrEqual(8);
    expect(solo.told.length).toBeGreaterThanOrEqual(1);
    expect(solo.told.length).toBeLessThanOrEqual(8);
    await all.close();
    await solo.close();
  }, 90_000);
});
