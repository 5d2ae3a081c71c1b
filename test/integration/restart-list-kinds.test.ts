/**
 * A server's state change (a restart, a crash, a crash loop) is told to clients for the list
 * kinds it offered before or offers after, not for every kind: a server with tools and
 * resources but no prompts had every client told its prompts changed at each restart, and one
 * in a crash loop all three kinds at every turn (each making an IDE list again). Real built hub,
 * legacy mutable-server fixtures over stdio, the SDK 1.x client over HTTP with its GET stream,
 * the admin API's restart.
 */
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, waitForReady } from '../helpers/wire.js';
import { LIST_CHANGE_WINDOW_MS } from '../../src/hub/change-coalescer.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const TOOLS = JSON.stringify([
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'exit', description: 'Crash (test control)', inputSchema: { type: 'object' } },
]);

let hub: HubProcess;
let client: Client;
let copy: string;
const said: string[] = [];

/** Whatever a coalescing window still holds is said by its end: wait out a few. */
const settled = () => new Promise((r) => setTimeout(r, 4 * LIST_CHANGE_WINDOW_MS));
const stateOf = async (id: string) => (await health(hub.url)).servers.find((s) => s.id === id)?.state;

beforeAll(async () => {
  const dir = tmp();
  // c runs from a copy that is removed once it is up: after its crash it cannot start again.
  // The fixture imports ../stdin-lines.mjs: the copy keeps that layout (catalog/ beside it).
  mkdirSync(join(dir, 'catalog'));
  copy = join(dir, 'catalog', 'crashing-server.mjs');
  copyFileSync(join(ROOT, MUTABLE), copy);
  copyFileSync(join(ROOT, 'test/fixtures/stdin-lines.mjs'), join(dir, 'stdin-lines.mjs'));
  hub = await startHub({
    servers: {
      a: nodeServer(MUTABLE, [], { ERA: 'legacy' }), // tools and resources, no prompts
      c: { command: process.execPath, args: [copy], env: { ERA: 'legacy', TOOLS } },
    },
  });
  await waitForReady(hub.url, ['a', 'c']);
  client = new Client({ name: 'restart-kinds', version: '1.0.0' });
  client.fallbackNotificationHandler = async (n) => void said.push(n.method);
  await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
  expect((await client.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['a__echo', 'c__echo']));
}, 60_000);
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await hub?.stop();
});

describe('list changes of a server changing state', () => {
  it('a restart of a server without prompts tells tools and resources (gone, back), never prompts', async () => {
    await settled();
    said.length = 0;
    expect((await fetch(`${new URL(hub.url).origin}/admin/servers/a/restart`, { method: 'POST' })).status).toBe(200);
    await waitForReady(hub.url, ['a']);
    await expect.poll(() => said.filter((m) => m === 'notifications/tools/list_changed').length, { timeout: 10_000, interval: 20 }).toBe(2);
    await settled();
    expect([...said].sort()).toEqual([
      'notifications/resources/list_changed',
      'notifications/resources/list_changed',
      'notifications/tools/list_changed',
      'notifications/tools/list_changed',
    ]);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('a__echo');
  }, 30_000);

  it('a crash loop tells the crash once (its items gone), and nothing at each attempt after it or at `failed`', async () => {
    await settled();
    said.length = 0;
    rmSync(copy);
    // The call is lost with the process; the hub restarts it, each attempt fails, and after the
    // crash-loop limit (5 in a minute, from 250 ms apart, doubling) it is `failed`.
    await client.callTool({ name: 'c__exit', arguments: {} }).catch(() => undefined);
    await expect.poll(() => stateOf('c'), { timeout: 30_000, interval: 100 }).toBe('failed');
    await settled();
    expect([...said].sort()).toEqual(['notifications/resources/list_changed', 'notifications/tools/list_changed']);
    expect((await client.listTools()).tools.map((t) => t.name)).not.toContain('c__echo');
    // A restart of the failed server that fails again: nothing was shown of it, nothing changes.
    said.length = 0;
    expect((await fetch(`${new URL(hub.url).origin}/admin/servers/c/restart`, { method: 'POST' })).status).toBe(200);
    await expect.poll(() => hub.logs.filter((l) => l.includes('upstream could not start')).length, { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(6);
    await settled();
    expect(said).toEqual([]);
  }, 60_000);
});
