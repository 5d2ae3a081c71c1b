/**
 * Tools whose `x-mcp-header` annotation breaks the rules are dropped by the hub (digest §3.4,
 * §8.12: an HTTP client M! drop them, and the hub could neither mirror nor check their
 * headers), logged, audited and shown as held back to the operator; a valid annotation's tool
 * stays. Real built hub, a raw modern stdio fixture listing such tools, raw HTTP to see what the
 * hub itself sends (an SDK client might drop them on its own). So are tools whose schemas are
 * not of the shape clients read (catalog/tool-schemas.ts): the SDK clients list the rest.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, modernPost, post, waitForReady, type Json } from '../helpers/wire.js';
import { waitForRows } from './ledger-helpers.js';

const TOOLS = [
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } } } },
  { name: 'region', description: 'Valid: a string mirrored as Mcp-Param-Region', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } },
  { name: 'ratio', description: 'Invalid: a number property', inputSchema: { type: 'object', properties: { ratio: { type: 'number', 'x-mcp-header': 'Ratio' } } } },
  { name: 'listed', description: 'Invalid: under items', inputSchema: { type: 'object', properties: { tags: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Tag' } } } } },
  // Boolean property schemas: valid JSON Schema, which the 2025-11-25 types (and the v1 SDK client) have as objects.
  { name: 'bools', description: 'Boolean property schemas', inputSchema: { type: 'object', properties: { any: true, none: false } }, outputSchema: { type: 'object', properties: { any: true } } },
  // Schemas no client can read, each of which failed the whole list for the SDK clients.
  { name: 'null_input', description: 'inputSchema null', inputSchema: null },
  { name: 'no_input', description: 'No inputSchema' },
  { name: 'string_type', description: 'inputSchema of type string', inputSchema: { type: 'string' } },
  { name: 'required_text', description: 'required is a string', inputSchema: { type: 'object', required: 'a' } },
  { name: 'props_list', description: 'properties is a list', inputSchema: { type: 'object', properties: [{ type: 'string' }] } },
  { name: 'output_list', description: 'outputSchema is a list', inputSchema: { type: 'object' }, outputSchema: [] },
  { name: 'null_prop', description: 'a property schema that is null', inputSchema: { type: 'object', properties: { a: null } } },
];

describe('tools with an invalid x-mcp-header annotation, or schemas no client can read', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', TOOLS: JSON.stringify(TOOLS) }) } });
    await waitForReady(hub.url, ['m']);
  });
  afterAll(async () => void (await hub?.stop()));

  it('are not listed, cannot be called, and are logged, audited and shown held back; a valid one stays', async () => {
    const listed = await modernPost(hub.url, 1, 'tools/list');
    expect((listed.body?.result?.tools as Json[]).map((t) => t.name).sort()).toEqual(['m__bools', 'm__echo', 'm__region']);

    const call = await modernPost(hub.url, 2, 'tools/call', { name: 'm__ratio', arguments: { ratio: 0.5 } });
    expect(call.body?.error?.message).toMatch(/m__ratio/);

    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(() => db.prepare("SELECT upstream_name AS tool, outcome, error_message AS why FROM audit WHERE method = 'catalog/drop' AND error_message LIKE 'x-mcp-header:%' ORDER BY upstream_name").all(), { timeout: 5_000 })
        .toEqual([
          { tool: 'listed', outcome: 'denied', why: expect.stringMatching(/items: "Tag" is not on a property reached through properties alone/) },
          { tool: 'ratio', outcome: 'denied', why: expect.stringMatching(/"Ratio" is on a property of type "number"/) },
        ]);
    } finally {
      db.close();
    }
    expect(hub.logs.filter((l) => l.includes('tool dropped: its x-mcp-header annotation'))).not.toHaveLength(0);

    const all = ((await (await fetch(new URL('/admin/tools?all=1', hub.url))).json()) as { tools: Json[] }).tools;
    const ratio = all.find((t) => String(t.name ?? t.upstreamName).includes('ratio'));
    expect(JSON.stringify(ratio)).toMatch(/dropped: its x-mcp-header annotation breaks the rules/);
  });

  it('tools whose schemas clients cannot read are dropped, so the SDK clients of both eras can list the rest (boolean property schemas spelt as objects for legacy ones)', async () => {
    const v1 = new ClientV1({ name: 'v1', version: '1' });
    await v1.connect(new TransportV1(new URL(hub.url)));
    const v2 = new ClientV2({ name: 'v2', version: '1' });
    await v2.connect(new TransportV2(new URL(hub.url)));
    try {
      const legacy = (await v1.listTools()).tools;
      expect(legacy.map((t) => t.name).sort()).toEqual(['m__bools', 'm__echo', 'm__region']);
      expect((await v2.listTools()).tools.map((t) => t.name).sort()).toEqual(['m__bools', 'm__echo', 'm__region']);
      // To a legacy client a boolean property schema is the object that means the same.
      const bools = legacy.find((t) => t.name === 'm__bools')!;
      expect(bools.inputSchema.properties).toEqual({ any: {}, none: { not: {} } });
      expect(bools.outputSchema?.properties).toEqual({ any: {} });
    } finally {
      await v1.close();
      await v2.close();
    }
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      await expect
        .poll(() => db.prepare("SELECT upstream_name AS tool, error_message AS why FROM audit WHERE method = 'catalog/drop' AND error_message LIKE 'schema:%' ORDER BY upstream_name").all(), { timeout: 5_000 })
        .toEqual([
          { tool: 'no_input', why: 'schema: its inputSchema is missing' },
          { tool: 'null_input', why: 'schema: its inputSchema is not an object' },
          { tool: 'null_prop', why: 'schema: its inputSchema.properties["a"] is not a schema' },
          { tool: 'output_list', why: 'schema: its outputSchema is not an object' },
          { tool: 'props_list', why: 'schema: its inputSchema.properties is not an object' },
          { tool: 'required_text', why: 'schema: its inputSchema.required is not a list of names' },
          { tool: 'string_type', why: 'schema: its inputSchema has type "string", not "object"' },
        ]);
    } finally {
      db.close();
    }
    expect(hub.logs.some((l) => l.includes('tool dropped: its schemas are not of the shape clients read'))).toBe(true);
  });

  // The header mirrors the argument as sent; whether the argument is of its schema's type is the
  // schema check's to say (a tool error naming it, as the SDK v2 server has it): a faithful
  // header was refused -32020 'does not match', and an object argument's 'missing' header (an
  // object has no header form), telling the client to fix a header it had right.
  it('an x-mcp-header argument of the wrong type is refused by its schema (a tool error), not as a header mismatch; a wrong header still is', async () => {
    const call = (id: string, region: unknown, header?: string) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'm__region', arguments: { region } }), { ...modernHeaders('tools/call', 'm__region'), ...(header === undefined ? {} : { 'mcp-param-region': header }) });
    for (const [id, region, header] of [['region-number', 5, '5'], ['region-true', true, 'true'], ['region-object', { zone: 'a' }, undefined], ['region-list', ['eu'], undefined]] as const) {
      const r = await call(id, region, header);
      expect(r.status, `${id}: ${r.text}`).toBe(200);
      expect(r.body?.result, id).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringContaining('region') }] });
    }
    const wrong = await call('region-wrong-header', 'eu', 'us');
    expect([wrong.status, wrong.body?.error?.code]).toEqual([400, -32020]);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { tool: 'm__region' }, (x) => x.length >= 5);
    expect(rows.map((r) => [r.requestId, r.outcome])).toEqual([
      ['region-number', 'tool_error'],
      ['region-true', 'tool_error'],
      ['region-object', 'tool_error'],
      ['region-list', 'tool_error'],
      ['region-wrong-header', 'rpc_error'],
    ]);
  });

  // The header mirrors an argument; an absent or null one has nothing to mirror (the client M!
  // omit it, digest §3.4), so a header sent anyway is ignored, as the SDK v2 server does: the
  // hub refused it -32020. And a -32020 names the header as the schema declares it, not
  // lower-cased ('Mcp-Param-region').
  it('a Mcp-Param-* header for an absent or null argument is ignored; a -32020 names the header as the schema spells it', async () => {
    const call = (id: string, args: Json, header: Record<string, string>) =>
      post(hub.url, modernBody(id, 'tools/call', { name: 'm__region', arguments: args }), { ...modernHeaders('tools/call', 'm__region'), ...header });
    for (const [id, args] of [['region-absent', {}], ['region-null', { region: null }]] as const) {
      const r = await call(id, args, { 'mcp-param-region': 'eu' });
      expect(r.status, `${id}: ${r.text}`).toBe(200);
      expect(r.body?.error, id).toBeUndefined();
      expect(r.body?.result, id).toBeDefined();
    }
    const missing = await call('region-missing', { region: 'eu' }, {});
    expect([missing.status, missing.body?.error?.code, missing.body?.error?.message]).toEqual([400, -32020, 'missing Mcp-Param-Region header for arguments.region']);
    const wrong = await call('region-mismatch', { region: 'eu' }, { 'mcp-param-region': 'us' });
    expect(wrong.body?.error?.message).toBe('Mcp-Param-Region header does not match arguments.region');
  });
});
