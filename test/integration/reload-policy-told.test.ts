/**
 * A reload that changes `policy.poisoning` (or the plugins) judges every list held again, and
 * tells clients of the kinds some server offers (or some list held has items of): judging lists
 * of a kind no server has changes nothing. A hub of tools-only servers had every client told
 * that prompts and resources changed too, at each such reload. The real built hub (config
 * watch), a real modern stdio upstream offering tools alone, the official v1 client (GET stream).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { PromptListChangedNotificationSchema, ResourceListChangedNotificationSchema, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { streamWatchingFetch, waitForReady } from '../helpers/wire.js';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', DISCOVER_CAPS: JSON.stringify({ tools: { listChanged: true } }) }) }, policy: { poisoning: 'warn' } });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('a reload of policy.poisoning', () => {
  it('tells clients of the kinds its servers offer, not of every kind', async () => {
    const told = { tools: 0, prompts: 0, resources: 0 };
    const c = new ClientV1({ name: 'reload-policy-told', version: '1.0.0' });
    c.setNotificationHandler(ToolListChangedNotificationSchema, async () => void told.tools++);
    c.setNotificationHandler(PromptListChangedNotificationSchema, async () => void told.prompts++);
    c.setNotificationHandler(ResourceListChangedNotificationSchema, async () => void told.resources++);
    const watch = streamWatchingFetch();
    await c.connect(new TransportV1(new URL(hub.url), { fetch: watch.fetch }));
    await watch.streamOpen;
    try {
      expect((await c.listTools()).tools.map((t) => t.name)).toContain('s__echo');
      setSection(hub, 'policy', { poisoning: 'block' });
      await loggedTimes(hub, 'config reload: policy replaced', 1);
      await expect.poll(() => told.tools, { timeout: 5_000, interval: 20 }).toBe(1);
      // No event stands for a notice not sent: past the 250 ms window the reload's notices share.
      await new Promise((r) => setTimeout(r, 600));
      expect(told).toEqual({ tools: 1, prompts: 0, resources: 0 });
    } finally {
      await c.close();
    }
  }, 60_000);
});
