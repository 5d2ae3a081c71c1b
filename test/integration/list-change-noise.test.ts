/**
 * A legacy client is told a list changed only of changes its lists may not show. Servers that
 * become ready while its initialize waits in the start-up grace are in its first lists; the
 * coalescer said the later of them at its window's end, after the handshake, and each such
 * client got tools, prompts and resources list_changed for nothing (an IDE lists all again).
 * Real built hub, legacy mutable-server fixtures held starting by files, the SDK 1.x client
 * over HTTP with its GET stream.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LIST_CHANGE_WINDOW_MS } from '../../src/hub/change-coalescer.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
/** A legacy mutable server offering tools, prompts and resources, held starting while `hold` exists. */
function held(hold: string): Record<string, unknown> {
  const s = nodeServer(MUTABLE, [], { ERA: 'legacy', PROMPTS: '1', START_HOLD_FILE: hold });
  return { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])] };
}

let hub: HubProcess | undefined;
let client: Client | undefined;
afterEach(async () => {
  await client?.close().catch(() => undefined);
  await hub?.stop();
  client = hub = undefined;
});

describe('legacy list_changed after initialize', () => {
  it('servers ready while the handshake waited in the start-up grace are not said changed to it; a change after it is', async () => {
    const dir = tmp();
    const holds = ['a', 'b', 'c'].map((id) => join(dir, `${id}.hold`));
    for (const h of holds) writeFileSync(h, '');
    const servers = Object.fromEntries(['a', 'b', 'c'].map((id, i) => [id, held(holds[i]!)]));
    hub = await startHub({ servers }, { env: { SWITCHYARD_STARTUP_GRACE_MS: '30000' } });
    const said: string[] = [];
    client = new Client({ name: 'noise', version: '1.0.0' });
    client.fallbackNotificationHandler = async (n) => void said.push(n.method);
    const connecting = client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    // The handshake waits for the servers; they become ready together (in one coalescing window
    // or two: the first said at once, before the handshake is answered, the others at its end).
    await expect.poll(() => hub!.logs.some((l) => l.includes('waits in the start-up grace')), { timeout: 10_000, interval: 20 }).toBe(true);
    for (const h of holds) rmSync(h);
    await connecting;
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['a__echo', 'b__echo', 'c__echo']));
    // Whatever a window opened before the handshake's answer holds is said by its end.
    await new Promise((r) => setTimeout(r, 4 * LIST_CHANGE_WINDOW_MS));
    expect(said).toEqual([]);
    // A change after it is said: a prompt added to b.
    const mutated = await client.callTool({ name: 'b__mutate', arguments: { op: 'prompt', def: { name: 'wave', description: 'Wave' } } });
    expect(JSON.stringify(mutated.content)).toContain('mutated');
    await expect.poll(() => said, { timeout: 10_000, interval: 20 }).toEqual(['notifications/prompts/list_changed']);
    expect((await client.listPrompts()).prompts.map((p) => p.name)).toContain('b__wave');
  }, 60_000);
});
