/**
 * A principal's own first list that its client's list was answered without (not back within
 * FIRST_LIST_WAIT_MS), that then failed, is told to that principal once when it lands: the
 * cache told it as a first list left out, and the catalog again as a failed own list (ownFailed)
 * come back. Real built hub with an API key, a processPerPrincipal legacy paging-server fixture
 * over stdio whose first tools/list is held by a file and then fails, a legacy client's GET
 * stream over loopback HTTP.
 */
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { heardSoFar, LEGACY_VERSION, post, type Json } from '../helpers/wire.js';
import { LIST_CHANGE_WINDOW_MS } from '../../src/hub/change-coalescer.js';
import { tmp } from './catalog-helpers.js';

const KEY = 'sy_own-first-told-once-00000000000000000000';
const PAGING = `${process.cwd()}/test/fixtures/catalog/paging-server.mjs`;

let hub: HubProcess | undefined;
const ac = new AbortController();
afterAll(async () => {
  ac.abort();
  await hub?.stop();
});

const toolNames = (result: Json | undefined) => ((result?.tools as Json[]) ?? []).map((t) => t.name);

describe("a principal's own first list left out, failed, then listed", () => {
  it('is told to its client once', async () => {
    const hold = join(tmp(), 'fail.hold');
    writeFileSync(hold, '');
    hub = await startHub({
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(KEY) }] },
      servers: { p: { command: process.execPath, args: [PAGING], env: { ERA: 'legacy', FAIL_PAGE: '1', FAIL_WALKS: '1', FAIL_HOLD_FILE: hold, N: '2', PAGE: '5' }, processPerPrincipal: true } },
    });
    await waitForReadyWith(hub.url, ['p'], KEY);
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${KEY}` };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'own-once', version: '1' } } }, headers);
    const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': LEGACY_VERSION };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
    const stream = await fetch(hub.url, { headers: { ...h, accept: 'text/event-stream' }, signal: ac.signal });
    expect(stream.status).toBe(200);
    const heard = heardSoFar(stream);
    let id = 0;
    const list = async () => toolNames((await post(hub!.url, { jsonrpc: '2.0', id: ++id, method: 'tools/list', params: {} }, h)).body?.result);
    // Answered without p after FIRST_LIST_WAIT_MS: her process's first list is still held.
    expect(await list()).toEqual([]);
    rmSync(hold);
    // It fails; her lists meanwhile lack p, until its retry wait is over and it is listed.
    await expect.poll(list, { timeout: 20_000, interval: 250 }).toEqual(['p__i0', 'p__i1']);
    // A second notice would come at the end of the coalescing window the first opened.
    await new Promise((r) => setTimeout(r, 4 * LIST_CHANGE_WINDOW_MS));
    expect(heard().match(/notifications\/tools\/list_changed/g)).toHaveLength(1);
  }, 60_000);
});
