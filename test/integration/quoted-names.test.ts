/**
 * Names and URIs a client sent, as the hub's errors quote them: a megabyte tool name came back
 * whole in "Unknown tool: …" (and a resource's URI twice: in the message and in `data.uri`).
 * A message quotes 128 characters at most (no hub name is longer), the cut marked with `…`;
 * a not-found's `data.uri` is the URI as sent up to 8192 characters (the longest the hub keeps).
 * With the SDKs as clients: SDK v1 (2025-11-25 over HTTP), SDK v2 (2026-07-28, whose Mcp-Name
 * header repeats the name, so its names stay within a header's size).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { join } from 'node:path';
import { SDK1, SDK2, waitForReady, waitForRows } from './ledger-helpers.js';

let hub: HubProcess;
const GH = `ghp_${'Z9y8X7w6V5'.repeat(4)}`;
let v1: ClientV1;
let v2: ClientV2;

beforeAll(async () => {
  // A tool whose schema allows no other argument: the hub names the one it was given.
  const strict = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', TOOLS: JSON.stringify([{ name: 'strict', inputSchema: { type: 'object', additionalProperties: false, properties: { a: { type: 'string' } } } }]) });
  hub = await startHub({ servers: { a: nodeServer(SDK1), m: nodeServer(SDK2), s: strict } });
  await waitForReady(hub.url, ['a', 'm', 's']);
  v1 = new ClientV1({ name: 'quoted-v1', version: '1.0.0' });
  await v1.connect(new TransportV1(new URL(hub.url)));
  v2 = new ClientV2({ name: 'quoted-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await v2.connect(new TransportV2(new URL(hub.url)));
}, 30_000);

afterAll(async () => {
  await v1?.close();
  await v2?.close();
  await hub?.stop();
});

async function failed(p: Promise<unknown>): Promise<{ code?: unknown; message: string; data?: unknown }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(Error);
  return err as { code?: unknown; message: string; data?: unknown };
}

/** The text an error quotes after `prefix`, as the SDK's message carries it. */
function quoted(message: string, prefix: string): string {
  const at = message.indexOf(prefix);
  expect(at, message.slice(0, 300)).toBeGreaterThanOrEqual(0);
  return message.slice(at + prefix.length);
}

describe('a long name or URI in an error', () => {
  const MB = 'n'.repeat(1 << 20);

  it('a 2025-11-25 client (SDK v1) gets its megabyte tool, prompt and method names quoted to 128 characters, the cut marked', async () => {
    const tool = await failed(v1.callTool({ name: MB, arguments: {} }));
    expect(tool.code).toBe(-32602);
    expect(quoted(tool.message, 'Unknown tool: ')).toBe(`${'n'.repeat(127)}…`);
    const prompt = await failed(v1.getPrompt({ name: MB }));
    expect(quoted(prompt.message, 'Unknown prompt: ')).toBe(`${'n'.repeat(127)}…`);
    const method = await failed(v1.request({ method: MB, params: {} } as never, (await import('@modelcontextprotocol/sdk/types.js')).EmptyResultSchema));
    expect(method.code).toBe(-32601);
    expect(quoted(method.message, 'method not found: ')).toBe(`${'n'.repeat(127)}…`);
    // So is the name of a prompt argument that is no text.
    const arg = await failed(v1.getPrompt({ name: 'a__greet', arguments: { [MB]: 5 } as never }));
    expect(arg.code).toBe(-32602);
    expect(quoted(arg.message, 'arguments.')).toBe(`${'n'.repeat(127)}… must be a string`);
    // A name the hub could have is quoted whole.
    const short = await failed(v1.callTool({ name: 'a__nope', arguments: {} }));
    expect(quoted(short.message, 'Unknown tool: ')).toBe('a__nope');
  });

  it("an argument the tool's schema does not allow: its name quoted to 128 characters in the message, to 8192 in the error's pointer", async () => {
    const r = (await v1.callTool({ name: 's__strict', arguments: { [MB]: 1 } })) as { isError?: boolean; content: { text: string }[]; _meta: Record<string, { message: string; pointer: string }> };
    expect(r.isError).toBe(true);
    const error = r._meta['dev.switchyard/error']!;
    expect(error.message).toBe(`Invalid arguments for tool s__strict: arguments/${'n'.repeat(126)}… is not an allowed property`);
    expect(r.content[0]!.text).toBe(error.message);
    expect(error.pointer).toBe(`/${'n'.repeat(8190)}…`);
  });

  it("a 2025-11-25 client's megabyte URI not found: 128 characters of it in the message, 8192 in data.uri", async () => {
    const uri = `file:///${MB}`;
    const err = await failed(v1.readResource({ uri }));
    expect(err.code).toBe(-32002);
    expect(quoted(err.message, 'Resource not found: ')).toBe(`${uri.slice(0, 127)}…`);
    expect(err.data).toEqual({ uri: `${uri.slice(0, 8191)}…` });
    // One of a length a client may use comes back as sent.
    const usual = `file:///${'d/'.repeat(200)}missing.txt`;
    expect(await failed(v1.readResource({ uri: usual }))).toMatchObject({ code: -32002, data: { uri: usual } });
  });

  it('a 2026-07-28 client (SDK v2) gets its long tool name and URI quoted as cut', async () => {
    const long = 'm'.repeat(6000);
    const tool = await failed(v2.callTool({ name: long, arguments: {} }));
    expect(tool.code).toBe(-32602);
    expect(quoted(tool.message, 'Unknown tool: ')).toBe(`${'m'.repeat(127)}…`);
    const uri = `file:///${long}`;
    const read = await failed(v2.readResource({ uri }));
    expect(read.code).toBe(-32602);
    expect(quoted(read.message, 'Resource not found: ')).toBe(`${uri.slice(0, 127)}…`);
    expect(read.data).toEqual({ uri });
  });

  it('a credential across the cut is redacted before it, in the error the client gets and in the ledger row', async () => {
    // 120 characters, then a GitHub token: cut first, its first 7 characters were left, which
    // neither the ledger's redaction nor the log's recognises (the shape needs 36 after "ghp_").
    const name = `${'t'.repeat(119)}-${GH}`;
    const err = await failed(v1.callTool({ name, arguments: {} }));
    expect(quoted(err.message, 'Unknown tool: ')).toBe(`${'t'.repeat(119)}-[redact…`);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'rpc_error' }, (r) => r.some((x) => String(x.errorMessage ?? '').startsWith(`Unknown tool: ${'t'.repeat(119)}-`)));
    const row = rows.find((x) => String(x.errorMessage ?? '').startsWith(`Unknown tool: ${'t'.repeat(119)}-`))!;
    expect(row.errorMessage).not.toContain('ghp_');
    expect(JSON.stringify(row)).not.toContain('ghp_Z9y');
  });
});
