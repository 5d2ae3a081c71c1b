/**
 * A line over `listen.maxBodyBytes` on `switchyard stdio` is never read whole, but its two ends
 * say what it is: a request is answered with its id (a client waits on that id: a modern
 * client's MRTR retry carrying large `inputResponses` was answered with none and waited out its
 * own timeout), and a legacy client's answer to a question the hub put to it fails that question
 * at once, as a 413 does over HTTP (it left the question open for `policy.inputTimeoutMs`, and
 * the call ended "the client did not answer"). Real hub, the translation fixtures, a raw client.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { waitForRows } from './ledger-helpers.js';

const MAX = 65_536;
const MODERN = '2026-07-28';
const CAPS = { elicitation: { form: {}, url: {} } };
const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': CAPS };
const BIG = 'x'.repeat(MAX + 10_000);

type Json = Record<string, any>;

let c: LineClient;
let d: string;

beforeAll(async () => {
  d = mkdtempSync(join(tmpdir(), 'switchyard-stdio-oversize-'));
  const file = join(d, 'hub.config.json');
  writeFileSync(
    file,
    JSON.stringify({
      ledger: { path: join(d, 'ledger.db') },
      listen: { maxBodyBytes: MAX },
      // Long enough that no question's own timer explains what these tests see.
      policy: { inputTimeoutMs: 30_000 },
      servers: { odd: nodeServer('test/fixtures/translation/odd-input-required.mjs'), ls: nodeServer('test/fixtures/translation/legacy-server.mjs') },
    }),
  );
  c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } }));
  // A legacy session on the pipe (its questions come on stdout); modern requests are served beside it.
  await c.request({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: CAPS, clientInfo: { name: 'oversize', version: '1' } } }, 30_000);
  c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  for (let i = 0; ; i++) {
    const listed = await c.request({ jsonrpc: '2.0', id: `list-${i}`, method: 'tools/list', params: { _meta: META } });
    const names = (listed.result?.tools ?? []).map((t: Json) => t.name);
    if (names.includes('odd__proto_key') && names.includes('ls__elicit_form')) break;
    if (i > 100) throw new Error(`the upstreams did not come up: ${JSON.stringify(listed)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}, 60_000);

afterAll(() => c?.kill());

describe('a request on a line over listen.maxBodyBytes', () => {
  it('is answered -32600 with its id, read at either end of the line (an SDK writes it last), and has its row under that id', async () => {
    const lines = [
      ['big-first', JSON.stringify({ jsonrpc: '2.0', id: 'big-first', method: 'tools/call', params: { name: 'ls__echo', arguments: { text: BIG }, _meta: META } })],
      ['big-last', JSON.stringify({ method: 'tools/call', params: { name: 'ls__echo', arguments: { text: BIG }, _meta: META }, jsonrpc: '2.0', id: 'big-last' })],
    ] as const;
    for (const [id, line] of lines) {
      c.send(line);
      const err = await c.next((m) => m.id === id);
      expect(err.error).toEqual({ code: -32600, message: `message too large: the limit is ${MAX} bytes per line` });
    }
    // Without an id at either end it is answered as before: the error, no id.
    c.send(JSON.stringify({ method: 'tools/call', params: { name: 'ls__echo', arguments: { text: BIG }, _meta: META }, jsonrpc: '2.0', id: 'big-inside', note: 'id not at either end' }));
    const idless = await c.next((m) => m.error?.code === -32600 && m.id === undefined);
    expect(idless.error.message).toMatch(/too large/);
    const rows = await waitForRows(join(d, 'ledger.db'), {}, (r) => r.filter((x) => /too large/.test(String(x.errorMessage))).length >= 3);
    const refused = rows.filter((x) => /too large/.test(String(x.errorMessage)));
    expect(refused.map((r) => [r.requestId, r.method, r.outcome, r.errorCode])).toEqual([
      ['big-first', 'tools/call', 'rpc_error', -32600],
      ['big-last', 'tools/call', 'rpc_error', -32600],
      ['', 'tools/call', 'rpc_error', -32600],
    ]);
  });

  it("a modern client's retry carrying large inputResponses is answered at once with its id; its requestState is not used up: a retry that fits completes the call", async () => {
    const first = await c.request({ jsonrpc: '2.0', id: 'm1', method: 'tools/call', params: { name: 'ls__elicit_form', arguments: { who: 'big' }, _meta: META } });
    expect(first.result.resultType).toBe('input_required');
    const [key] = Object.keys(first.result.inputRequests);
    const retry = (id: string, name: string) =>
      JSON.stringify({ method: 'tools/call', params: { name: 'ls__elicit_form', arguments: { who: 'big' }, _meta: META, requestState: first.result.requestState, inputResponses: { [key!]: { action: 'accept', content: { name } } } }, jsonrpc: '2.0', id });
    const t0 = Date.now();
    c.send(retry('m2', BIG));
    const tooLarge = await c.next((m) => m.id === 'm2');
    expect(tooLarge.error).toMatchObject({ code: -32600, message: expect.stringMatching(/too large/) });
    expect(Date.now() - t0).toBeLessThan(10_000);
    c.send(retry('m3', 'Ada'));
    const done = await c.next((m) => m.id === 'm3');
    expect(done.result, JSON.stringify(done)).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });
  });
});

describe("a legacy client's answer to a question on a line over listen.maxBodyBytes", () => {
  it('fails its question at once, the call ending with an error naming the limit; nothing is sent back for the answer itself', async () => {
    const content = { n: BIG };
    const shapes: ((id: unknown) => Json)[] = [
      (id) => ({ result: { action: 'accept', content }, jsonrpc: '2.0', id }),
      (id) => ({ jsonrpc: '2.0', id, result: { action: 'accept', content } }),
      // No id at either end: the one question open on the session is the one it answers.
      (id) => ({ jsonrpc: '2.0', result: { action: 'accept', content }, id, note: 'id not at either end' }),
    ];
    for (const [i, shape] of shapes.entries()) {
      const callId = `legacy-${i}`;
      const t0 = Date.now();
      const seen = c.received.length;
      c.send(JSON.stringify({ jsonrpc: '2.0', id: callId, method: 'tools/call', params: { name: 'odd__proto_key' } }));
      const asked = await c.next((m) => m.method === 'elicitation/create' && c.received.indexOf(m) >= seen);
      c.send(JSON.stringify(shape(asked.id)));
      const final = await c.next((m) => m.id === callId);
      expect(final.error, JSON.stringify(final)).toMatchObject({ code: -32603, message: expect.stringContaining(`larger than the hub takes (listen.maxBodyBytes, ${MAX} bytes)`) });
      expect(Date.now() - t0, `shape ${i}`).toBeLessThan(15_000);
      // The answer is a response: JSON-RPC answers none, so no error line for it.
      expect(c.received.slice(seen).filter((m) => m.error && m.id !== callId)).toEqual([]);
    }
  });
});
