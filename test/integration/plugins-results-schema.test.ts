/**
 * A tool's result as afterCall hooks leave it is held to the tool's outputSchema, as the
 * upstream's own was before them: a replacement whose structuredContent breaks it, or leaves it
 * out, is answered with the hub's EOUTPUT error (saying the plugins made it), not sent on for
 * the client's own check to throw at. A real SDK v1 client, the real built hub, a real stdio
 * upstream, a plugin file of the test's own and the bundled redact-secrets (whose
 * redaction the result keeps).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';
import { waitForRows } from './ledger-helpers.js';

let hub: HubProcess;

// leak answers structuredContent { token: 'xoxb-…', safe: 'nothing secret' }.
const TOOLS = [
  {
    name: 'leak',
    inputSchema: { type: 'object', properties: { mode: { type: 'string' } } },
    outputSchema: { type: 'object', properties: { token: { type: 'string' }, safe: { type: 'string' } }, required: ['safe'] },
  },
];

const PLUGIN = `export default { name: 'reshape', afterCall(ctx, result) {
  if (ctx.tool.upstreamName !== 'leak') return;
  switch (ctx.arguments.mode) {
    case 'number': return { ...result, structuredContent: { safe: 7 } };
    case 'dropped': return { content: [{ type: 'text', text: 'no structure' }] };
    case 'fine': return { ...result, structuredContent: { ...result.structuredContent, safe: 'rewritten' } };
  }
} };`;

beforeAll(async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'reshape.mjs'), PLUGIN);
  hub = await startHub({ plugins: { paths: ['./reshape.mjs'] }, servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', TOOLS: JSON.stringify(TOOLS) }) } }, { dir });
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const errorOf = (r: Record<string, unknown>): unknown => (r._meta as Record<string, unknown> | undefined)?.['dev.switchyard/error'];

describe('a result afterCall hooks replaced', () => {
  it("is held to the outputSchema: one that breaks it is the hub's EOUTPUT error; one that keeps it goes through", async () => {
    const client = new Client({ name: 'sdk1', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      // The client knows the outputSchemas, and checks each result against its tool's.
      await client.listTools();
      const fine = await client.callTool({ name: 'm__leak', arguments: { mode: 'fine' } });
      expect(fine.structuredContent).toEqual({ token: '[redacted:slack-token]', safe: 'rewritten' });
      for (const mode of ['number', 'dropped']) {
        const r = await client.callTool({ name: 'm__leak', arguments: { mode } });
        expect([mode, r.isError]).toEqual([mode, true]);
        expect(errorOf(r)).toMatchObject({ code: 'EOUTPUT', message: expect.stringContaining("m__leak's result as plugin hooks left it does not match its outputSchema") });
      }
    } finally {
      await client.close();
    }
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: 'm__leak', method: 'tools/call' }, (rs) => rs.length === 3);
    expect(rows.map((r) => [r.outcome, r.errorKind])).toEqual([
      ['ok', null],
      ['tool_error', 'policy'],
      ['tool_error', 'policy'],
    ]);
  });
});
