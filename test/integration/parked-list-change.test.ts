/**
 * A legacy stdio server whose tools list changes while a call of a modern client waits for that
 * client's answer (server-everything says tools/list_changed as it starts, whatever call is in
 * flight then). The call is parked at the hub and holds the server's call gate alone; the
 * client's retry, routed after the change, waits for the new tools list. The hub's own fetch of
 * that list used to wait for the gate the parked call held: the retry waited for it, the fetch
 * for the retry, until the fetch gave up at the server's timeoutMs.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

/** Far more than the retry needs, far less than the test's limit: a retry held this long failed. */
const TIMEOUT_MS = 20_000;

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({
    servers: { s1: { ...nodeServer('test/fixtures/servers/sdk1-server.mjs', [], { CHANGE_THEN_ASK_TOOL: '1' }), timeoutMs: TIMEOUT_MS } },
    ledger: { enabled: false },
  });
  await waitForReady(hub.url, ['s1']);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

it("answers a modern client's retry at once when the server's tools list changed while its call was parked", async () => {
  const client = new Client({ name: 'parked-list-change', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' }, capabilities: { elicitation: { form: {} } } });
  const asked: string[] = [];
  client.setRequestHandler('elicitation/create', async (req) => (asked.push(req.params.message), { action: 'accept', content: { colour: 'teal' } }));
  await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
  try {
    expect(client.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    await client.listTools();
    const t0 = performance.now();
    const result = await client.callTool({ name: 's1__change_then_ask', arguments: { name: 'added_meanwhile' } }, { timeout: TIMEOUT_MS * 2 });
    const took = performance.now() - t0;
    expect(result.content).toEqual([{ type: 'text', text: 'accept:teal' }]);
    expect(asked).toEqual(['[s1] Which colour?']);
    // A round and a retry on loopback: well under the server's timeoutMs, which the retry waited out.
    expect(took).toBeLessThan(TIMEOUT_MS / 2);
    // The new tool is listed, and callable, as the change said.
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('s1__added_meanwhile');
    expect((await client.callTool({ name: 's1__added_meanwhile', arguments: {} })).content).toEqual([{ type: 'text', text: 'added_meanwhile' }]);
  } finally {
    await client.close();
  }
}, 90_000);
