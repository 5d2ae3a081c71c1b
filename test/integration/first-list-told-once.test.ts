/**
 * A server's first list that a client's list was answered without (not back within
 * FIRST_LIST_WAIT_MS) and that then failed is told once when it lands, not twice: the cache told
 * it as a first list left out, and the catalog again as a failed list (listError) come back, so
 * each client got two tools/list_changed (the second at the coalescing window's end) and listed
 * again for nothing. Real built hub, a legacy paging-server fixture over stdio whose first
 * tools/list is held by a file and then fails, the SDK 1.x client over HTTP with its GET stream.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { LIST_CHANGE_WINDOW_MS } from '../../src/hub/change-coalescer.js';
import { tmp } from './catalog-helpers.js';
import { serverHealth, waitUntil } from './faults-helpers.js';

let hub: HubProcess | undefined;
let client: Client | undefined;
afterEach(async () => {
  await client?.close().catch(() => undefined);
  await hub?.stop();
  client = hub = undefined;
});

describe('a first list left out, failed, then listed', () => {
  it('is told to a client once', async () => {
    const hold = join(tmp(), 'fail.hold');
    writeFileSync(hold, '');
    // Its first tools/list (the hub's own, at ready) is answered -32603 once `hold` is gone; the next ones list s__i0, s__i1.
    hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/paging-server.mjs', [], { ERA: 'legacy', N: '2', PAGE: '5', FAIL_PAGE: '1', FAIL_WALKS: '1', FAIL_HOLD_FILE: hold }) } });
    await waitForReady(hub.url, ['s']);
    const said: string[] = [];
    client = new Client({ name: 'told-once', version: '1.0.0' });
    client.fallbackNotificationHandler = async (n) => void said.push(n.method);
    await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    const names = async () => (await client!.listTools()).tools.map((t) => t.name);
    // Answered without s after FIRST_LIST_WAIT_MS: its first list is still held.
    expect(await names()).toEqual([]);
    rmSync(hold);
    await waitUntil("s's listError", async () => (await serverHealth(hub!.url, 's')).listError ?? undefined);
    // Listed again once its failure's retry wait is over.
    await expect.poll(names, { timeout: 20_000, interval: 250 }).toEqual(['s__i0', 's__i1']);
    // A second notice would come at the end of the coalescing window the first opened.
    await new Promise((r) => setTimeout(r, 4 * LIST_CHANGE_WINDOW_MS));
    expect(said).toEqual(['notifications/tools/list_changed']);
  }, 60_000);
});
