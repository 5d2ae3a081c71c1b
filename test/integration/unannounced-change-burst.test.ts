/**
 * A change nobody announced (a legacy server without listChanged) is found when its list is
 * fetched again and told to every client at most once a second. A second change found inside
 * that second is told at its end: a client that listed after the first tell must not keep a
 * list naming tools that are gone or missing ones that came.
 */
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('unannounced list changes close together', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { m: { ...nodeServer(MUTABLE, [], { ERA: 'legacy', LIST_CHANGED: '0' }), cacheTtlMs: 100 } } });
  }, 60_000);
  afterAll(async () => {
    await hub?.stop();
  });

  it('the second is told too, after the first one’s second is over', async () => {
    const a = new ClientV1({ name: 'watcher', version: '1.0.0' });
    let view: string[] = [];
    const relist = async () => (view = (await a.listTools()).tools.map((t) => t.name));
    a.setNotificationHandler(ToolListChangedNotificationSchema, () => void relist());
    await a.connect(new TransportV1(new URL(hub.url)));
    const b = new ClientV1({ name: 'lister', version: '1.0.0' });
    await b.connect(new TransportV1(new URL(hub.url)));
    await expect.poll(async () => (await relist()).includes('m__mutate'), { timeout: 20_000 }).toBe(true);
    await sleep(300); // a's GET stream opens after initialize

    const add = (name: string) => b.callTool({ name: 'm__mutate', arguments: { op: 'add', silent: true, def: { name, description: name, inputSchema: { type: 'object' } } } });
    await add('fresh1');
    await sleep(150); // the entry (100 ms) went stale
    expect((await b.listTools()).tools.map((t) => t.name)).toContain('m__fresh1'); // found, and told
    await expect.poll(() => view.includes('m__fresh1'), { timeout: 2000, interval: 20 }).toBe(true);
    await add('fresh2');
    await sleep(150);
    expect((await b.listTools()).tools.map((t) => t.name)).toContain('m__fresh2'); // found inside the second
    // Told at the second's end: the watcher lists again and has it.
    await expect.poll(() => view.includes('m__fresh2'), { timeout: 3000, interval: 20 }).toBe(true);
    await a.close();
    await b.close();
  }, 60_000);
});
