/**
 * A forwarded result is serialised once, where the ledger measures it (responseBytes), and that
 * text is spliced into the answer (issue #9). What must hold whatever the path: the bytes a
 * client gets are exactly JSON.stringify of the answer the hub means (its era's form of the
 * result, in that key order), and responseBytes is exactly the upstream result's JSON size.
 * Checked on the raw wire of the real built hub in front of the real SDK servers, for both eras
 * of client and upstream, a batch, answers that became SSE streams (a legacy session's
 * resumable one too), a result an afterCall plugin replaced or edited, an idempotency replay (and
 * the answer its key keeps), an MRTR round and its retry, and `switchyard stdio`.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, META_CAPS, META_SERVER_INFO, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { fixture, SDK1, SDK2, waitForReady, waitForRows, type Row } from './ledger-helpers.js';
import { VERSION } from '../../src/version.js';

const HUB_INFO = { name: 'switchyard', version: VERSION };
/** The modern SDK server's own serverInfo, which its results carry in `_meta` (the hub's replaces it). */
const SDK2_META = { [META_SERVER_INFO]: { name: 'sdk2-modern', version: '1.0.0' } };
/** Not ASCII: a size in bytes differs from one in characters. */
const TEXT = 'hé ☃ "quoted"';

const PLUGIN = `export default { name: 'rewriter', afterCall(ctx, result) {
  if (ctx.arguments.text === 'replace') return { content: [{ type: 'text', text: 'replaced ☃' }], structuredContent: { by: 'plugin' } };
  if (ctx.arguments.text === 'edit') { result.content[0].text += ' (edited)'; result._meta = { 'x/note': 1 }; return result; }
} };`;

let hub: HubProcess;
let dir: string;
let db: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-forwarded-wire-'));
  writeFileSync(join(dir, 'rewriter.mjs'), PLUGIN);
  hub = await startHub(
    {
      plugins: { paths: ['./rewriter.mjs'] },
      servers: {
        f: fixture(SDK1, dir),
        m: fixture(SDK2, dir, {}, join(dir, 'counter-m.json')),
        q: nodeServer('test/fixtures/translation/modern-server.mjs'),
      },
    },
    { dir },
  );
  db = join(hub.dir, 'ledger.db');
  await waitForReady(hub.url, ['f', 'm', 'q']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const answer = (id: unknown, result: Json): string => JSON.stringify({ jsonrpc: '2.0', id, result });
const modernForm = (r: Json): Json => ({ ...r, resultType: 'complete', _meta: { [META_SERVER_INFO]: HUB_INFO } });
const echoed = (text: string): Json => ({ content: [{ type: 'text', text: `echo:${text}` }] });
const bytes = (r: Json): number => Buffer.byteLength(JSON.stringify(r));

/** The finished rows of these request ids' calls, by id. */
async function finishedRows(ids: string[]): Promise<Map<unknown, Row>> {
  const done = (r: Row[]) => ids.every((id) => r.some((x) => x.requestId === id && x.outcome !== 'in_flight'));
  const rows = await waitForRows(db, { method: 'tools/call' }, done);
  return new Map(rows.filter((r) => r.outcome !== 'in_flight').map((r) => [r.requestId, r]));
}

function modernCall(id: string | number, name: string, args: Json, meta: Json = modernMeta()): ReturnType<typeof post> {
  return post(hub.url, modernBody(id, 'tools/call', { name, arguments: args }, meta), modernHeaders('tools/call', name));
}

/** The data of an SSE body's last event. */
function lastEventData(text: string): string {
  const events = text.split('\n\n').filter((e) => e.includes('data: '));
  const last = events.at(-1)!;
  return last.slice(last.indexOf('data: ') + 6);
}

/** A legacy HTTP session at `version`. */
async function session(version: string): Promise<(body: unknown) => ReturnType<typeof post>> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'wire', version: '1' } } }, headers);
  const h = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': version };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return (body) => post(hub.url, body, h);
}

describe('the wire of a forwarded result, and its responseBytes', () => {
  it('a modern client, of a legacy and of a modern upstream', async () => {
    const f = await modernCall('mf', 'f__echo', { text: TEXT });
    expect(f.text).toBe(answer('mf', modernForm(echoed(TEXT))));
    const m = await modernCall('mm', 'm__add', { a: 2, b: 40 });
    expect(m.text).toBe(answer('mm', { content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 }, resultType: 'complete', _meta: { [META_SERVER_INFO]: HUB_INFO } }));
    const rows = await finishedRows(['mf', 'mm']);
    expect(rows.get('mf')!.responseBytes).toBe(bytes(echoed(TEXT)));
    // The modern upstream's result as it came: its resultType and its own serverInfo.
    expect(rows.get('mm')!.responseBytes).toBe(bytes({ content: [{ type: 'text', text: '42' }], structuredContent: { sum: 42 }, resultType: 'complete', _meta: SDK2_META }));
  });

  it('a legacy client, of a legacy and of a modern upstream; a batch; a resumable SSE answer', async () => {
    const call = await session(LEGACY_VERSION);
    const f = await call({ jsonrpc: '2.0', id: 'lf', method: 'tools/call', params: { name: 'f__echo', arguments: { text: TEXT } } });
    expect(f.text).toBe(answer('lf', echoed(TEXT)));
    const m = await call({ jsonrpc: '2.0', id: 'lm', method: 'tools/call', params: { name: 'm__echo', arguments: { text: TEXT } } });
    expect(m.text).toBe(answer('lm', echoed(TEXT)));
    // Progress makes the answer a stream, the session's resumable one.
    const slow = await call({ jsonrpc: '2.0', id: 'ls', method: 'tools/call', params: { name: 'f__slow', arguments: { ms: 150 }, _meta: { progressToken: 'p' } } });
    expect(slow.headers.get('content-type')).toContain('text/event-stream');
    expect(lastEventData(slow.text)).toBe(answer('ls', { content: [{ type: 'text', text: 'slept 150' }] }));

    const batch = await session('2025-03-26');
    const both = await batch([
      { jsonrpc: '2.0', id: 'b1', method: 'tools/call', params: { name: 'f__echo', arguments: { text: TEXT } } },
      { jsonrpc: '2.0', id: 'b2', method: 'tools/call', params: { name: 'm__echo', arguments: { text: 'b2' } } },
    ]);
    const [b1, b2] = [answer('b1', echoed(TEXT)), answer('b2', echoed('b2'))];
    expect([`[${b1},${b2}]`, `[${b2},${b1}]`]).toContain(both.text);
    const rows = await finishedRows(['lm', 'b1']);
    expect(rows.get('lm')!.responseBytes).toBe(bytes({ ...echoed(TEXT), resultType: 'complete', _meta: SDK2_META }));
    expect(rows.get('b1')!.responseBytes).toBe(bytes(echoed(TEXT)));
  });

  it("a modern client's answer that became an SSE stream", async () => {
    const r = await modernCall('ms', 'f__slow', { ms: 150 }, modernMeta({ progressToken: 'p' }));
    expect(r.headers.get('content-type')).toContain('text/event-stream');
    expect(lastEventData(r.text)).toBe(answer('ms', modernForm({ content: [{ type: 'text', text: 'slept 150' }] })));
  });

  it('a result an afterCall plugin replaced, or edited in place and returned: the changed result, measured as such', async () => {
    const replaced = { content: [{ type: 'text', text: 'replaced ☃' }], structuredContent: { by: 'plugin' } };
    expect((await modernCall('pr', 'f__echo', { text: 'replace' })).text).toBe(answer('pr', modernForm(replaced)));
    const edited = { content: [{ type: 'text', text: 'echo:edit (edited)' }], _meta: { 'x/note': 1 } };
    expect((await modernCall('pe', 'm__echo', { text: 'edit' })).text).toBe(
      answer('pe', { content: edited.content, resultType: 'complete', _meta: { 'x/note': 1, [META_SERVER_INFO]: HUB_INFO } }),
    );
    const call = await session(LEGACY_VERSION);
    expect((await call({ jsonrpc: '2.0', id: 'pl', method: 'tools/call', params: { name: 'm__echo', arguments: { text: 'edit' } } })).text).toBe(answer('pl', edited));
    const rows = await finishedRows(['pr', 'pe']);
    expect(rows.get('pr')!.responseBytes).toBe(bytes(replaced));
    expect(rows.get('pe')!.responseBytes).toBe(bytes({ content: edited.content, resultType: 'complete', _meta: { 'x/note': 1 } }));
  });

  it('a replay from an idempotency key: the same bytes, the same size', async () => {
    const meta = modernMeta({ 'dev.switchyard/idempotency-key': 'wire-key-1' });
    const first = await modernCall('k', 'm__echo', { text: TEXT }, meta);
    const again = await modernCall('k', 'm__echo', { text: TEXT }, meta);
    expect(first.text).toBe(answer('k', modernForm(echoed(TEXT))));
    expect(again.text).toBe(first.text);
    const rows = await waitForRows(db, { method: 'tools/call' }, (r) => r.filter((x) => x.idempotencyKey === 'wire-key-1' && x.outcome !== 'in_flight').length === 2);
    const keyed = rows.filter((x) => x.idempotencyKey === 'wire-key-1');
    expect(keyed.map((r) => r.outcome).sort()).toEqual(['ok', 'replayed']);
    const kept = { ...echoed(TEXT), resultType: 'complete', _meta: SDK2_META };
    expect(keyed.map((r) => r.responseBytes)).toEqual([bytes(kept), bytes(kept)]);
    // The answer kept for the key (what a replay after a restart reads) is the result's JSON.
    const store = new Database(db, { readonly: true });
    try {
      expect(store.prepare('SELECT answer_json FROM idempotency WHERE key = ?').pluck().get('wire-key-1')).toBe(JSON.stringify({ result: kept }));
    } finally {
      store.close();
    }
  });

  it('an MRTR round (input_required) and the retry that ends it', async () => {
    const meta = modernMeta({ [META_CAPS]: { elicitation: { form: {} } } });
    const asked = await modernCall('r1', 'q__elicit_form', { who: 'Ada' }, meta);
    const round = JSON.parse(asked.text) as { result: Json };
    expect(round.result.resultType).toBe('input_required');
    // Whatever the round holds (a sealed state), its text is JSON.stringify's, its _meta the hub's alone.
    expect(asked.text).toBe(JSON.stringify(round));
    expect(round.result._meta).toEqual({ [META_SERVER_INFO]: HUB_INFO });
    const retry = await post(
      hub.url,
      modernBody('r2', 'tools/call', { name: 'q__elicit_form', arguments: { who: 'Ada' }, requestState: round.result.requestState, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } }, meta),
      modernHeaders('tools/call', 'q__elicit_form'),
    );
    expect(retry.text).toBe(answer('r2', modernForm({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] })));
    const rows = await waitForRows(db, { tool: 'q__elicit_form' }, (r) => r.some((x) => x.requestId === 'r2' && x.outcome === 'ok'));
    expect(rows.find((r) => r.requestId === 'r2')!.responseBytes).toBe(
      bytes({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }], resultType: 'complete', _meta: { [META_SERVER_INFO]: { name: 'translation-modern', version: '1.0.0' } } }),
    );
  });
});

describe('the wire of `switchyard stdio`', () => {
  it('a modern line and a legacy session, each answer one line of exactly that JSON', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-forwarded-wire-stdio-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { path: join(d, 'ledger.db') }, servers: { f: fixture(SDK1, d), m: fixture(SDK2, d, {}, join(d, 'counter-m.json')) } }));
    const proc = spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, stdio: ['pipe', 'pipe', 'ignore'] });
    const lines: string[] = [];
    let buf = '';
    let wake: (() => void) | undefined;
    proc.stdout.setEncoding('utf8').on('data', (c: string) => {
      buf += c;
      for (let i; (i = buf.indexOf('\n')) >= 0; buf = buf.slice(i + 1)) lines.push(buf.slice(0, i));
      wake?.();
    });
    const line = async (id: string): Promise<string> => {
      for (;;) {
        const found = lines.find((l) => l.includes(`"id":${JSON.stringify(id)}`));
        if (found) return found;
        await new Promise<void>((r) => (wake = r));
      }
    };
    const send = (msg: Json): void => void proc.stdin.write(`${JSON.stringify(msg)}\n`);
    try {
      send(modernBody('sm', 'tools/call', { name: 'm__echo', arguments: { text: TEXT } }));
      expect(await line('sm')).toBe(answer('sm', modernForm(echoed(TEXT))));
      send({ jsonrpc: '2.0', id: 'si', method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'wire', version: '1' } } });
      await line('si');
      send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      send({ jsonrpc: '2.0', id: 'sl', method: 'tools/call', params: { name: 'f__add', arguments: { a: 1, b: 2 } } });
      expect(await line('sl')).toBe(answer('sl', { content: [{ type: 'text', text: '3' }], structuredContent: { sum: 3 } }));
    } finally {
      proc.stdin.end();
      await new Promise((r) => proc.once('exit', r));
    }
  });
});
