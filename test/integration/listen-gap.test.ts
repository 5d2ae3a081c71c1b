/**
 * A modern upstream's listen stream that ends unasked (here: the server ends it gracefully, as
 * one behind a proxy's stream time limit does) is opened again, and the lists are fetched again:
 * clients are told only if a list differs, not at every end of the stream.
 */
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const TOOLS = [
  { name: 'drop', description: 'ends every listen stream', inputSchema: { type: 'object' } },
  { name: 'mutate', description: 'changes the tools', inputSchema: { type: 'object' } },
];

describe('a modern upstream listen stream that ends and is opened again', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_TTL_MS: '60000', CACHE_SCOPE: 'public', TOOLS: JSON.stringify(TOOLS) }) } });
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  it('tells clients nothing when nothing changed, and a change made while it was down once', async () => {
    const c = new ClientV1({ name: 'gap', version: '1.0.0' });
    const told = { tools: 0, prompts: 0, resources: 0 };
    c.setNotificationHandler(ToolListChangedNotificationSchema, () => void told.tools++);
    c.setNotificationHandler(PromptListChangedNotificationSchema, () => void told.prompts++);
    c.setNotificationHandler(ResourceListChangedNotificationSchema, () => void told.resources++);
    await c.connect(new TransportV1(new URL(hub.url)));
    await expect.poll(async () => (await c.listTools()).tools.map((t) => t.name).includes('m__drop'), { timeout: 20_000 }).toBe(true);
    await c.listPrompts().catch(() => undefined);
    await c.listResources();
    await sleep(300); // the GET stream opens after initialize
    const ended = () => hub.logs.filter((l) => l.includes('upstream listen stream ended')).length;
    const acked = () => hub.logs.filter((l) => l.includes('upstream listen acknowledged')).length;
    for (let i = 0; i < 3; i++) {
      const a0 = acked();
      await c.callTool({ name: 'm__drop', arguments: {} });
      await expect.poll(acked, { timeout: 10_000, interval: 20 }).toBeGreaterThan(a0); // listening again
    }
    expect(ended()).toBeGreaterThanOrEqual(3);
    await sleep(500);
    expect(told).toEqual({ tools: 0, prompts: 0, resources: 0 });
    // A change the server does not say (silent), found when the stream is back: told, once.
    await c.callTool({ name: 'm__mutate', arguments: { op: 'add', silent: true, def: { name: 'fresh', description: 'new', inputSchema: { type: 'object' } } } });
    await c.callTool({ name: 'm__drop', arguments: {} });
    await expect.poll(() => told.tools, { timeout: 10_000, interval: 20 }).toBe(1);
    expect((await c.listTools()).tools.map((t) => t.name)).toContain('m__fresh');
    await c.close();
  }, 90_000);
});
