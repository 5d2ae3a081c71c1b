/**
 * A 2025-11-25 server's result is no MRTR round whatever it carries: `resultType` is a field of
 * the 2026-07-28 era alone, so a legacy server's is its own extension's, not an input_required
 * the hub should relay (a retry with inputResponses would run the tool again on a server that
 * knows no retries) nor an unknown result type to refuse. The upstream is a real process over
 * stdio (test/fixtures/quirks/legacy-modern-fields.mjs); the clients are the SDK 1.x client
 * (declaring elicitation) and raw modern requests.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernCall, waitForReady } from './ledger-helpers.js';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { old: nodeServer('test/fixtures/quirks/legacy-modern-fields.mjs') } });
  await waitForReady(hub.url, ['old']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

const text = (r: unknown): string => ((r as { content?: { text?: string }[] }).content ?? [])[0]?.text ?? '';

describe("a legacy server's result with a resultType", () => {
  it('reaches a legacy client as the answer it is: the client is not asked, the tool runs once', async () => {
    const asked: string[] = [];
    const c = new V1Client({ name: 'legacy-fields', version: '1' }, { capabilities: { elicitation: {} } });
    c.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(String(req.params.message));
      return { action: 'accept', content: {} };
    });
    await c.connect(new V1Transport(new URL(hub.url)));
    try {
      const first = await c.callTool({ name: 'old__asks', arguments: {} });
      expect(asked).toEqual([]);
      const second = await c.callTool({ name: 'old__asks', arguments: {} });
      // Two calls, two runs: none was run again as a retry.
      expect([text(first), text(second)]).toEqual([expect.stringMatching(/^run \d+$/), expect.stringMatching(/^run \d+$/)]);
      expect(Number(text(second).slice(4)) - Number(text(first).slice(4))).toBe(1);
      expect(first).not.toHaveProperty('resultType');
    } finally {
      await c.close();
    }
  });

  it('reaches a modern client as a complete result, whatever resultType the server wrote', async () => {
    const asks = await modernCall(hub.url, 1, 'tools/call', { name: 'old__asks', arguments: {} }, { meta: { 'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } } } });
    expect(asks.status).toBe(200);
    expect(asks.body?.result).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: expect.stringMatching(/^run \d+$/) }] });
    expect(asks.body?.result).not.toHaveProperty('requestState');
    const odd = await modernCall(hub.url, 2, 'tools/call', { name: 'old__odd', arguments: {} });
    expect(odd.body?.error).toBeUndefined();
    expect(odd.body?.result).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: expect.stringMatching(/^run \d+$/) }] });
  });
});
