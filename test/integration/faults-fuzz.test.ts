/**
 * Fault suite, property test (issue 6, case 4): 2,500 random and mutated frames at the real
 * hub over HTTP, and 2,500 over `switchyard stdio` (FUZZ_RUNS sets another number, FUZZ_SEED
 * another seed). Nothing crashes, nothing answers 5xx, every
 * line or body the hub sends is a valid JSON-RPC message, and every well-formed request gets
 * its own response (same id) within its timeout. Frames are built from valid requests of both
 * eras (coherent headers included) and then mutated, plus plain garbage.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { parseMessages, type RpcMessage } from '../helpers/wire.js';
import { healthOf, waitForState } from './faults-helpers.js';
import { SDK1 } from './ledger-helpers.js';

/**
 * Frames a run sends over each transport. Measured as the hub's covered lines (NODE_V8_COVERAGE
 * on the hub process, same seed): 10,000 frames of the mix without `callable` and `notice`
 * covered 5 lines (HTTP) and 14 (stdio) that these 2,500 do not (a clientInfo whose version is no
 * string, a health check the longer run lived 30 s to see, a few branches hit by chance), and
 * these 2,500 some 250 each that the 10,000 did not (forwarding, the read cache, subscriptions,
 * argument checks). 2,000 of that mix covered 300 lines fewer than its 10,000.
 */
const RUNS = 2_500;
/** listen.maxBodyBytes of the hubs under test: a longer frame is refused before its id is read. */
const MAX_BODY = 8192;
const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const PV = 'io.modelcontextprotocol/protocolVersion';
const CAPS = 'io.modelcontextprotocol/clientCapabilities';
const INFO = 'io.modelcontextprotocol/clientInfo';
/** Long-lived streams are not request/response exchanges: left out of the method pool. */
const METHODS = [
  'initialize',
  'ping',
  'server/discover',
  'tools/list',
  'tools/call',
  'prompts/list',
  'prompts/get',
  'resources/list',
  'resources/templates/list',
  'resources/read',
  'resources/subscribe',
  'resources/unsubscribe',
  'completion/complete',
  'logging/setLevel',
  'notifications/initialized',
  'notifications/cancelled',
  'tasks/get',
];
const TOOLS = ['fz__echo', 'fz__add', 'fz__counter_bump', 'fz__fail', 'fz__slow', 'nope', ''];

type Obj = Record<string, unknown>;
interface Frame {
  text: string;
  headers: Record<string, string>;
  /** The id a response must carry, when the frame is a well-formed request. */
  expectId?: string | number;
}

const printable = fc.stringMatching(/^[\x20-\x7e]{0,24}$/);
const id = fc.oneof(fc.integer(), fc.string({ maxLength: 12 }), fc.constant(null), fc.double(), fc.constant({}), fc.constant([1]), fc.boolean());
const json = fc.jsonValue({ maxDepth: 3 });
const args = fc.oneof(fc.dictionary(fc.string({ maxLength: 8 }), json, { maxKeys: 4 }), json, fc.constant({ text: 'hi', a: 1, b: 2, label: 'fz', ms: 1 }));
const meta = fc.record(
  {
    [PV]: fc.oneof(fc.constant(MODERN), fc.constant(LEGACY), printable),
    [CAPS]: fc.oneof(fc.constant({}), fc.constant({ elicitation: {} }), json),
    [INFO]: fc.oneof(fc.constant({ name: 'fuzz', version: '1' }), json),
    progressToken: fc.oneof(fc.string({ maxLength: 6 }), fc.integer()),
    'dev.switchyard/timeoutMs': fc.oneof(fc.integer({ min: -5, max: 3000 }), json),
    'dev.switchyard/idempotency-key': fc.string({ maxLength: 10 }),
  },
  { requiredKeys: [] },
);
const params = fc.record(
  {
    name: fc.oneof(fc.constantFrom(...TOOLS, 'fz__greet'), fc.string({ maxLength: 10 }), json),
    arguments: args,
    uri: fc.oneof(fc.constantFrom('sdk1://static/hello', 'sdk1://item/7', 'x://nope'), fc.string({ maxLength: 12 })),
    cursor: fc.oneof(fc.string({ maxLength: 20 }), json),
    protocolVersion: fc.oneof(fc.constant(LEGACY), fc.constant(MODERN), printable),
    capabilities: fc.oneof(fc.constant({}), json),
    level: fc.oneof(fc.constantFrom('debug', 'info', 'error'), json),
    requestId: id,
    ref: fc.oneof(fc.constant({ type: 'ref/prompt', name: 'fz__greet' }), json),
    argument: fc.oneof(fc.constant({ name: 'name', value: 'a' }), json),
    _meta: meta,
  },
  { requiredKeys: [] },
);

/** A request as a client would send it: modern with its envelope and mirrored headers, or legacy. */
const coherent = fc.tuple(fc.boolean(), fc.constantFrom(...METHODS), params, fc.oneof(fc.integer({ min: 0, max: 1e9 }), fc.string({ minLength: 1, maxLength: 10 })), fc.constantFrom('', 's0', 's1')).map(
  ([modern, method, p, rid, session]): { obj: Obj; headers: Record<string, string> } => {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const body: Obj = { jsonrpc: '2.0', id: rid, method, params: p };
    if (modern) {
      body.params = { ...p, _meta: { [PV]: MODERN, [CAPS]: {}, [INFO]: { name: 'fuzz', version: '1' }, ...(p._meta as Obj | undefined) } };
      headers['mcp-protocol-version'] = MODERN;
      headers['mcp-method'] = method;
      const name = (body.params as Obj).name ?? (body.params as Obj).uri;
      if (typeof name === 'string' && /^[\x20-\x7e]*$/.test(name)) headers['mcp-name'] = name;
    } else {
      headers['mcp-protocol-version'] = LEGACY;
      if (session) headers['mcp-session-id'] = session;
    }
    return { obj: body, headers };
  },
);

/**
 * A well-formed request that reaches the upstream (or the checks just before): a call of one of
 * its tools with arguments its schema takes, a list, a prompts/get, resources/read, subscribe or
 * unsubscribe of what it has, a completion of its prompt's argument; in either era (legacy: in one of the real sessions), its
 * _meta varied within what is valid. Of the other frames only about one in 800 is one (the
 * right method, name and arguments, a valid envelope or session, all at once): 10,000 frames
 * sent some 13 on to the upstream and 2,000 none, so the fuzz reached the hub's forwarding
 * (retries, idempotency keys, the read cache, subscriptions, the ledger's rows, the answers'
 * checks) only by its length. These frames take it there every run; their arguments, and a
 * modern one's clientInfo, are sometimes anything, for the checks made just before.
 */
const URIS = ['sdk1://static/hello', 'sdk1://item/7'];
const reaching = fc.oneof(
  fc.tuple(fc.constantFrom(...TOOLS.filter((t) => t.startsWith('fz__'))), fc.oneof(fc.constant({ text: 'hi', a: 1, b: 2, label: 'fz', ms: 1 }), args)).map(([name, a]) => ['tools/call', { name, arguments: a }] as const),
  fc.oneof(fc.constant({ name: 'a' }), json).map((a) => ['prompts/get', { name: 'fz__greet', arguments: a }] as const),
  fc.tuple(fc.constantFrom('resources/read', 'resources/subscribe', 'resources/unsubscribe'), fc.constantFrom(...URIS)).map(([method, uri]) => [method, { uri }] as const),
  fc.oneof(fc.constant({ name: 'name', value: 'a' }), json).map((argument) => ['completion/complete', { ref: { type: 'ref/prompt', name: 'fz__greet' }, argument }] as const),
  fc.tuple(fc.constantFrom('tools/list', 'prompts/list', 'resources/list', 'resources/templates/list'), fc.option(fc.string({ maxLength: 20 }), { nil: undefined })).map(([method, cursor]) => [method, cursor === undefined ? {} : { cursor }] as const),
);
const callable = fc
  .tuple(
    fc.boolean(),
    reaching,
    fc.oneof(fc.integer({ min: 0, max: 1e9 }), fc.string({ minLength: 1, maxLength: 10 })),
    fc.constantFrom('s0', 's1'),
    fc.record({ progressToken: fc.oneof(fc.string({ maxLength: 6 }), fc.integer()), 'dev.switchyard/timeoutMs': fc.integer({ min: 1, max: 3000 }), 'dev.switchyard/idempotency-key': fc.string({ maxLength: 10 }), [INFO]: json }, { requiredKeys: [] }),
  )
  .map(([modern, [method, p], rid, session, m]): Frame => {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const params: Obj = { ...p, _meta: m };
    if (modern) {
      params._meta = { [PV]: MODERN, [CAPS]: {}, [INFO]: { name: 'fuzz', version: '1' }, ...m };
      Object.assign(headers, { 'mcp-protocol-version': MODERN, 'mcp-method': method });
      const name = 'name' in p ? p.name : 'uri' in p ? p.uri : undefined;
      if (name !== undefined) headers['mcp-name'] = name;
    } else Object.assign(headers, { 'mcp-protocol-version': LEGACY, 'mcp-session-id': session });
    return frameOf(JSON.stringify({ jsonrpc: '2.0', id: rid, method, params }), headers);
  });

/** A notification a legacy client sends in its session (the sessions' own path, which a request never takes). */
const notice = fc.tuple(fc.constantFrom('notifications/initialized', 'notifications/cancelled', 'notifications/roots/list_changed'), fc.constantFrom('s0', 's1'), id).map(([method, session, requestId]) =>
  frameOf(JSON.stringify({ jsonrpc: '2.0', method, params: method === 'notifications/cancelled' ? { requestId } : {} }), { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LEGACY, 'mcp-session-id': session }),
);

const headerMutation = fc.record(
  {
    'content-type': fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', ''),
    accept: fc.constantFrom('application/json, text/event-stream', 'application/json', 'text/event-stream', '*/*', 'text/html'),
    'mcp-protocol-version': fc.oneof(fc.constantFrom(MODERN, LEGACY, '2024-11-05'), printable),
    'mcp-method': fc.oneof(fc.constantFrom(...METHODS), printable),
    'mcp-name': printable,
    'mcp-session-id': printable,
  },
  { requiredKeys: [] },
);

function isRequestShaped(o: unknown): o is { id: string | number; method: string } {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return false;
  const r = o as Obj;
  // Ids are strings or integers a JSON number holds exactly (digest §1.1); any other is refused without one.
  return r.jsonrpc === '2.0' && typeof r.method === 'string' && (typeof r.id === 'string' || (typeof r.id === 'number' && Number.isSafeInteger(r.id)));
}

function frameOf(text: string, headers: Record<string, string>): Frame {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const readable = Buffer.byteLength(text) <= MAX_BODY;
  return { text, headers, expectId: readable && isRequestShaped(parsed) ? parsed.id : undefined };
}

const frames: fc.Arbitrary<Frame> = fc.oneof(
  // Valid requests, as they are.
  { weight: 4, arbitrary: coherent.map((c) => frameOf(JSON.stringify(c.obj), c.headers)) },
  // Requests that reach the upstream, and a legacy session's notifications.
  { weight: 2, arbitrary: callable },
  { weight: 1, arbitrary: notice },
  // Valid requests with one field replaced by anything.
  {
    weight: 3,
    arbitrary: fc.tuple(coherent, fc.constantFrom('jsonrpc', 'id', 'method', 'params'), fc.oneof(json, fc.constant(undefined))).map(([c, k, v]) => {
      const o = { ...c.obj, [k]: v };
      if (v === undefined) delete o[k];
      return frameOf(JSON.stringify(o), c.headers);
    }),
  },
  // Valid requests with mutated headers.
  { weight: 2, arbitrary: fc.tuple(coherent, headerMutation).map(([c, h]) => frameOf(JSON.stringify(c.obj), { ...c.headers, ...h })) },
  // Byte-level damage: a character replaced, or the text cut short.
  {
    weight: 2,
    arbitrary: fc.tuple(coherent, fc.nat(), fc.string({ maxLength: 3 }), fc.boolean()).map(([c, pos, ins, cut]) => {
      const t = JSON.stringify(c.obj);
      const i = pos % t.length;
      return frameOf(cut ? t.slice(0, i) : t.slice(0, i) + ins + t.slice(i + 1), c.headers);
    }),
  },
  // Batches, scalars, garbage, and bodies over the limit.
  { weight: 1, arbitrary: fc.array(coherent.map((c) => c.obj), { maxLength: 3 }).map((a) => frameOf(JSON.stringify(a), { 'content-type': 'application/json' })) },
  { weight: 1, arbitrary: json.map((v) => frameOf(JSON.stringify(v) ?? 'null', { 'content-type': 'application/json' })) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200, unit: 'binary' }).map((s) => frameOf(s, { 'content-type': 'application/json' })) },
  { weight: 1, arbitrary: fc.integer({ min: 9_000, max: 12_000 }).map((n) => frameOf(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(n) } }), { 'content-type': 'application/json' })) },
);

/** A JSON-RPC message the hub may send: a response, or a notification / request of its own. */
function checkMessage(m: RpcMessage): void {
  expect(m.jsonrpc).toBe('2.0');
  if ('result' in m || 'error' in m) {
    // MCP: an id is a string or an integer; an error to a request whose id could not be read
    // has none (never null: digest §1.1).
    expect(typeof m.id === 'string' || typeof m.id === 'number' || (m.id === undefined && 'error' in m)).toBe(true);
    expect('result' in m && 'error' in m).toBe(false);
    if ('result' in m) expect(typeof m.result === 'object' && m.result !== null && !Array.isArray(m.result)).toBe(true);
    else {
      expect(Number.isInteger(m.error!.code)).toBe(true);
      expect(typeof m.error!.message).toBe('string');
      // The hub's catch-all: an exception nobody handled.
      expect(m.error!.message).not.toBe('internal error');
    }
  } else expect(typeof m.method).toBe('string');
}

function configFor(dir: string): Record<string, unknown> {
  return {
    ledger: { path: join(dir, 'ledger.db') },
    listen: { maxBodyBytes: MAX_BODY },
    servers: { fz: { ...nodeServer(SDK1, [], { COUNTER_FILE: join(dir, 'counter.json') }), timeoutMs: 5000 } },
  };
}

describe('2,500 random and mutated frames', () => {
  let hub: HubProcess;
  let sessions: string[] = [];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-fuzz-http-'));
    hub = await startHub(configFor(dir), { dir });
    await waitForState(hub.url, 'fz', ['ready']);
    // Two real legacy sessions, so that mutated frames also reach the session path.
    for (let i = 0; i < 2; i++) {
      const r = await fetch(hub.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'fz', version: '1' } } }),
      });
      await r.text();
      sessions.push(r.headers.get('mcp-session-id')!);
    }
  }, 60_000);

  afterAll(async () => {
    expect(await hub?.stop()).toBe(0);
  });

  it('over HTTP: no 5xx, only valid JSON-RPC back, every request answered with its id', async () => {
    let answered = 0;
    const total = Number(process.env.FUZZ_RUNS ?? RUNS);
    const seed = Number(process.env.FUZZ_SEED ?? 20260728);
    // Four streams of frames at once, each with a seed of its own (a failure names its seed): as
    // many frames, and a hub that also takes them concurrently, in far less of the run's time.
    const property = fc.asyncProperty(frames, async (f) => {
        const headers = { ...f.headers };
        if (headers['mcp-session-id'] === 's0' || headers['mcp-session-id'] === 's1') headers['mcp-session-id'] = sessions[Number(headers['mcp-session-id'][1])];
        const res = await fetch(hub.url, { method: 'POST', headers, body: f.text, signal: AbortSignal.timeout(15_000) });
        const body = await res.text();
        expect(res.status).toBeLessThan(500);
        const msgs = body ? parseMessages(res.headers.get('content-type'), body) : [];
        for (const m of msgs) checkMessage(m);
        const final = msgs.filter((m) => 'result' in m || 'error' in m);
        if (f.expectId !== undefined && res.status === 200) expect(final.map((m) => m.id)).toContain(f.expectId);
        if (f.expectId !== undefined && final.some((m) => m.id === f.expectId)) answered++;
        for (const m of final) if (f.expectId !== undefined) expect([f.expectId, undefined]).toContain(m.id);
    });
    await Promise.all([0, 1, 2, 3].map((k) => fc.assert(property, { numRuns: Math.ceil(total / 4), seed: seed + k, endOnFailure: true })));
    expect(answered).toBeGreaterThan(total / 10);
    expect((await healthOf(hub.url)).status).toBe('ok');
    expect(hub.proc.exitCode).toBeNull();
    expect(hub.logs.filter((l) => /request handler failed|unexpected error while handling/.test(l))).toEqual([]);
  }, 600_000);
});

describe('2,500 random and mutated frames over switchyard stdio', () => {
  let hub: StdioHub;
  let proc: ChildProcess;
  let lines: string[];
  let answerTo: StdioHub['answerTo'];

  beforeAll(() => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-fuzz-stdio-'));
    ({ proc, lines, answerTo } = hub = spawnStdioHub(dir, configFor(dir)));
  }, 60_000);

  afterAll(async () => expect(await hub.stop()).toBe(0));

  const sentinel = (n: number): string =>
    JSON.stringify({ jsonrpc: '2.0', id: `sentinel-${n}`, method: 'server/discover', params: { _meta: { [PV]: MODERN, [CAPS]: {}, [INFO]: { name: 'fz', version: '1' } } } });

  it('every line back is valid JSON-RPC, every request is answered, the hub stays up', async () => {
    // The first discover waits for the upstream (bounded): the hub is a fresh process, which on
    // a loaded machine took more than 20 s to answer it.
    const first = answerTo('sentinel-0', 45_000);
    proc.stdin!.write(sentinel(0) + '\n');
    await first;
    let n = 0;
    let answered = 0;
    await fc.assert(
      fc.asyncProperty(frames, async (f) => {
        n++;
        // One frame per line: a raw newline inside garbage would only make two garbage lines.
        const text = f.text.replace(/[\r\n]/g, ' ');
        const from = lines.length;
        // A frame that reuses a sentinel's id is still only one request: wait on the sentinel.
        const own = f.expectId !== undefined && !String(f.expectId).startsWith('sentinel-') ? answerTo(f.expectId) : undefined;
        const done = answerTo(`sentinel-${n}`);
        proc.stdin!.write(text + '\n' + sentinel(n) + '\n');
        await done;
        if (own) {
          await own;
          answered++;
        }
        for (const line of lines.slice(from)) checkMessage(JSON.parse(line) as RpcMessage);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? RUNS), seed: Number(process.env.FUZZ_SEED ?? 20260728), endOnFailure: true },
    );
    expect(answered).toBeGreaterThan(Number(process.env.FUZZ_RUNS ?? RUNS) / 10);
    expect(proc.exitCode).toBeNull();
    expect(hub.stderr()).not.toMatch(/unexpected error while handling|request handler failed/);
  }, 600_000);
});

// ------------------------------------------------------------------------------------------
// Each odd frame gets its era's answer. The runs above prove nothing breaks; these say what a
// frame of each kind is answered with, on both edges and in both eras: the JSON-RPC code (and on
// HTTP the status) of digest §1.3 / §6.3, the id when the frame's could be read, and for a call
// carrying `_meta` keys the hub does not know, those keys at the upstream unchanged.

/** What the hub owes a frame: its HTTP status, its error code and the id it names (none if unread); or, for a call, its unknown `_meta` keys as the upstream got them. */
interface Owed {
  status: number;
  code?: number;
  id?: string | number;
  forwards?: Obj;
  /** A notification: no answer at all (202 with no body over HTTP). */
  none?: true;
}
interface OddFrame {
  kind: string;
  era: 'modern' | 'legacy';
  text: string;
  /** What its headers say over HTTP (the modern ones mirror it; a mismatch names another). */
  method: string;
  name?: string;
  headers?: Record<string, string>;
  omitHeaders?: string[];
  owed: Owed;
  /** An HTTP-only matter (headers, a claim the stdio edge reads as no claim at all). */
  httpOnly?: boolean;
  /** Over stdio: the error a line over the limit gets (no status; the id its start shows). */
  stdioOwed?: Owed;
}

const ODD_RUNS = 300;
const ECHO_TOOLS = ['ql__echo', 'qm__echo'];
const oddId = fc.oneof(fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }), fc.string({ maxLength: 12 }));
const envelope = (): Obj => ({ [PV]: MODERN, [CAPS]: {}, [INFO]: { name: 'fuzz', version: '1' } });
function oddRequest(era: 'modern' | 'legacy', rid: unknown, method: string, p: Obj = {}): Obj {
  return { jsonrpc: '2.0', id: rid, method, params: era === 'modern' ? { ...p, _meta: { ...envelope(), ...(p._meta as Obj | undefined) } } : p };
}
const notJson = (s: string): boolean => {
  try {
    JSON.parse(s.replace(/^\uFEFF/, ''));
    return false;
  } catch {
    return s.trim() !== '';
  }
};
/** An id no MCP message may carry: null, an object, an array, a boolean, a fraction, an integer a JSON number does not hold exactly (raw JSON text). */
const badIdText = fc.oneof(
  fc.constantFrom('null', '{}', '[]', '[1]', 'true', 'false', '1.5', '-0.25', '1e300', '9007199254740993', '123456789012345678901234567890'),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)).map((d) => JSON.stringify(d)),
  fc.bigInt({ min: 2n ** 53n + 1n, max: 2n ** 80n }).map((b) => (Math.random() < 0.5 ? '-' : '') + b.toString()),
);
/** A `_meta` key the hub has no reading of (the spec's key grammar, no reserved prefix, none of its own or the bare reserved names). */
const label = fc.stringMatching(/^[a-z](?:[a-z0-9-]{0,6}[a-z0-9])?$/);
const foreignKey = fc
  .tuple(fc.option(fc.array(label, { minLength: 1, maxLength: 3 }), { nil: undefined }), fc.stringMatching(/^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,10}[A-Za-z0-9])?$/))
  .filter(([labels]) => labels === undefined || !['modelcontextprotocol', 'mcp'].includes(labels[1] ?? '') && labels.join('.') !== 'dev.switchyard')
  .map(([labels, name]) => (labels ? `${labels.join('.')}/${name}` : name))
  .filter((k) => !['progressToken', 'traceparent', 'tracestate', 'baggage'].includes(k));

function oddFrames(era: 'modern' | 'legacy'): fc.Arbitrary<OddFrame> {
  const plain = (kind: string, text: string, owed: Owed, method = 'tools/list', extra: Partial<OddFrame> = {}): OddFrame => ({ kind, era, text, method, owed, ...extra });
  const kinds: fc.Arbitrary<OddFrame>[] = [
    // Not JSON: printable garbage, or a request cut short.
    fc
      .oneof(printable, fc.tuple(oddId, fc.nat()).map(([rid, n]) => { const t = JSON.stringify(oddRequest(era, rid, 'tools/list')); return t.slice(0, n % t.length); }))
      .filter(notJson)
      .map((t) => plain('not JSON', t, { status: 400, code: -32700 })),
    // A jsonrpc that is not "2.0" (or none): -32600 naming the id it could read.
    fc.tuple(oddId, fc.constantFrom<unknown>('1.0', '2', 2, null, true, '', undefined, ' 2.0')).map(([rid, v]) => {
      const o = { ...oddRequest(era, rid, 'tools/list'), jsonrpc: v };
      if (v === undefined) delete o.jsonrpc;
      return plain('jsonrpc', JSON.stringify(o), { status: 400, code: -32600, id: rid });
    }),
    // An id of no allowed type: -32600 with no id.
    fc.tuple(badIdText, fc.constantFrom('tools/list', 'ping', 'tools/call')).map(([raw, method]) =>
      plain('bad id', JSON.stringify(oddRequest(era, '\u0000ID', method)).replace('"\\u0000ID"', raw), { status: 400, code: -32600 }, method),
    ),
    // A batch (neither era has them; a 2025-03-26 session alone may send one): -32600.
    fc.array(oddId, { maxLength: 3 }).map((ids) => plain('batch', JSON.stringify(ids.map((rid) => oddRequest(era, rid, 'tools/list'))), { status: 400, code: -32600 })),
    // params that are no object, naming the id: -32602 by position (an array, a JSON-RPC Request
    // whose params no MCP method takes), -32600 for no structured value (no Request at all).
    fc.tuple(oddId, fc.constantFrom('tools/list', 'tools/call', 'ping', 'resources/read'), fc.oneof(fc.array(json, { maxLength: 3 }), fc.string({ maxLength: 8 }), fc.integer(), fc.boolean(), fc.constant(null))).map(([rid, method, p]) =>
      plain('params', JSON.stringify({ jsonrpc: '2.0', id: rid, method, params: p }), { status: 400, code: Array.isArray(p) ? -32602 : -32600, id: rid }, method),
    ),
    // A method nobody has (the prototype's names among them, and long ones): -32601; 404 for a modern client.
    fc.tuple(oddId, fc.oneof(printable.map((s) => `fuzz/${s}`), fc.constantFrom('constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'), fc.integer({ min: 200, max: 4000 }).map((n) => 'm'.repeat(n)))).map(([rid, method]) =>
      plain('method', JSON.stringify(oddRequest(era, rid, method)), { status: era === 'modern' ? 404 : 200, code: -32601, id: rid }, method),
    ),
    // An over-long tool name (the body within the limit): an unknown tool, -32602 in-band.
    fc.tuple(oddId, fc.integer({ min: 500, max: 6000 })).map(([rid, n]) =>
      plain('long name', JSON.stringify(oddRequest(era, rid, 'tools/call', { name: 'x'.repeat(n), arguments: {} })), { status: 200, code: -32602, id: rid }, 'tools/call', { name: 'x'.repeat(n) }),
    ),
    // A body over listen.maxBodyBytes: 413 before anything is read; a stdio line so long, -32600
    // with the id its start shows (never read whole: stdio-oversize-lines.test.ts).
    fc.tuple(oddId, fc.integer({ min: MAX_BODY + 10, max: MAX_BODY * 2 })).map(([rid, n]) =>
      plain('too large', JSON.stringify(oddRequest(era, rid, 'ping', { pad: 'x'.repeat(n) })), { status: 413 }, 'ping', { stdioOwed: { status: 0, code: -32600, id: rid } }),
    ),
    // A progressToken of a type no ProgressToken has (both eras' schema.json: a string or an
    // integer, as the SDKs read it): -32602 in-band, never echoed in progress notifications the
    // client could not match.
    fc
      .tuple(oddId, fc.constantFrom(...ECHO_TOOLS), fc.oneof(fc.constant(null), fc.boolean(), fc.dictionary(fc.string({ maxLength: 3 }), json, { maxKeys: 2 }), fc.array(json, { maxLength: 2 }), fc.constantFrom(1.5, -0.25, 1e300)))
      .map(([rid, tool, token]) =>
        plain('progress token', JSON.stringify(oddRequest(era, rid, 'tools/call', { name: tool, arguments: {}, _meta: { progressToken: token } })), { status: 200, code: -32602, id: rid }, 'tools/call', { name: tool }),
      ),
    // A notification, known or not, with or without its _meta (optional on one) and, over HTTP, its
    // Mcp-Method header: accepted, and never answered (a modern one changes nothing over HTTP).
    // (A cancellation names an id no other frame has: a legacy session keeps one of an id it has
    // not seen for 10 s, and would end a later frame of that id unanswered.)
    fc.tuple(fc.constantFrom('notifications/cancelled', 'notifications/initialized', 'notifications/roots/list_changed', 'notifications/fuzz'), fc.boolean(), fc.boolean(), fc.nat()).map(([method, withMeta, withHeader, k]) => {
      const params: Obj = method === 'notifications/cancelled' ? { requestId: `never-sent-id-${k}` } : {};
      if (withMeta && era === 'modern') params._meta = envelope();
      return plain('notification', JSON.stringify({ jsonrpc: '2.0', method, params }), { status: 202, none: true }, method, withHeader ? {} : { omitHeaders: ['mcp-method'] });
    }),
    // A call of an echoing tool with `_meta` keys the hub does not know: they reach the upstream as they were.
    fc.tuple(oddId, fc.constantFrom(...ECHO_TOOLS), fc.dictionary(foreignKey, json, { minKeys: 1, maxKeys: 4 })).map(([rid, tool, extra]) =>
      plain('foreign _meta', JSON.stringify(oddRequest(era, rid, 'tools/call', { name: tool, arguments: {}, _meta: extra })), { status: 200, id: rid, forwards: JSON.parse(JSON.stringify(extra)) as Obj }, 'tools/call', { name: tool }),
    ),
  ];
  if (era === 'modern') {
    const method = fc.constantFrom('tools/list', 'server/discover', 'prompts/list', 'resources/list');
    kinds.push(
      // Without clientCapabilities, or with one that is no object: -32602, 400.
      fc.tuple(oddId, method, fc.oneof(fc.constant(undefined), fc.constant(null), fc.array(json, { maxLength: 2 }), fc.string({ maxLength: 5 }), fc.integer())).map(([rid, m, caps]) => {
        const o = oddRequest(era, rid, m);
        const meta = (o.params as Obj)._meta as Obj;
        if (caps === undefined) delete meta[CAPS];
        else meta[CAPS] = caps;
        return plain('capabilities', JSON.stringify(o), { status: 400, code: -32602, id: rid }, m);
      }),
      // No version claim in the body (no _meta, one of the wrong type, or no version key) under a
      // modern version header: -32602, 400. (Over stdio that is a legacy request: no header says otherwise.)
      fc.tuple(oddId, method, fc.constantFrom<unknown>('none', 'no params', null, [], 'x', 7)).map(([rid, m, how]) => {
        const o = oddRequest(era, rid, m);
        if (how === 'none') delete ((o.params as Obj)._meta as Obj)[PV];
        else if (how === 'no params') delete o.params;
        else (o.params as Obj)._meta = how;
        return plain('no claim', JSON.stringify(o), { status: 400, code: -32602, id: rid }, m, { httpOnly: true });
      }),
      // A version the hub does not serve, in the body and the header alike: -32022, 400.
      fc.tuple(oddId, method, fc.constantFrom('2099-01-01', LEGACY, '2024-11-05', '1.0', 'latest')).map(([rid, m, v]) =>
        plain('version', JSON.stringify(oddRequest(era, rid, m, { _meta: { [PV]: v } })), { status: 400, code: -32022, id: rid }, m, { headers: { 'mcp-protocol-version': v } }),
      ),
      // Headers that disagree with the body (the version, or the method): -32020, 400.
      fc.tuple(oddId, method, fc.boolean()).map(([rid, m, version]) =>
        plain('header mismatch', JSON.stringify(oddRequest(era, rid, m)), { status: 400, code: -32020, id: rid }, m, {
          httpOnly: true,
          headers: version ? { 'mcp-protocol-version': '2099-01-01' } : { 'mcp-method': m === 'tools/list' ? 'prompts/list' : 'tools/list' },
        }),
      ),
    );
  }
  return fc.oneof(...kinds);
}

function oddConfigFor(dir: string): Record<string, unknown> {
  return {
    ledger: { path: join(dir, 'ledger.db') },
    listen: { maxBodyBytes: MAX_BODY },
    servers: { ql: nodeServer('test/fixtures/quirks/legacy-32601.mjs'), qm: nodeServer('test/fixtures/quirks/modern.mjs') },
  };
}

/** The answer `m` is the one `owed` says (an error of its code and id; or a result whose upstream saw the foreign keys). */
function expectOwed(f: OddFrame, owed: Owed, m: RpcMessage | undefined): void {
  const where = `${f.kind} (${f.era}): ${f.text.slice(0, 200)}`;
  expect(m, where).toBeDefined();
  if (owed.forwards) {
    expect(m!.error, where).toBeUndefined();
    const seen = (m!.result?.structuredContent as { meta?: Obj } | undefined)?.meta;
    expect(seen, where).toMatchObject(owed.forwards);
    return;
  }
  expect(m!.error?.code, where).toBe(owed.code);
  expect(m!.id, where).toBe(owed.id);
}

describe('odd frames get their era’s answer', () => {
  let hub: HubProcess;
  let session: string;

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-odd-http-'));
    hub = await startHub(oddConfigFor(dir), { dir });
    await waitForState(hub.url, 'ql', ['ready']);
    await waitForState(hub.url, 'qm', ['ready']);
    const r = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'odd', version: '1' } } }),
    });
    await r.text();
    session = r.headers.get('mcp-session-id')!;
  }, 60_000);

  afterAll(async () => {
    expect(await hub?.stop()).toBe(0);
  });

  it('over HTTP, modern requests and a legacy session: the status, code and id of each era, foreign _meta keys forwarded', async () => {
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.oneof(oddFrames('modern'), oddFrames('legacy')), async (f) => {
        seen.add(`${f.era} ${f.kind}`);
        const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
        if (f.era === 'modern') Object.assign(headers, { 'mcp-protocol-version': MODERN, 'mcp-method': f.method }, f.name === undefined ? {} : { 'mcp-name': f.name });
        else Object.assign(headers, { 'mcp-protocol-version': LEGACY, 'mcp-session-id': session });
        Object.assign(headers, f.headers);
        for (const h of f.omitHeaders ?? []) delete headers[h];
        const res = await fetch(hub.url, { method: 'POST', headers, body: f.text, signal: AbortSignal.timeout(15_000) });
        const body = await res.text();
        expect(res.status, `${f.kind} (${f.era}): ${body.slice(0, 300)}`).toBe(f.owed.status);
        if (f.owed.status === 413) return;
        if (f.owed.none) {
          expect(body, f.kind).toBe('');
          return;
        }
        const msgs = parseMessages(res.headers.get('content-type'), body);
        for (const m of msgs) checkMessage(m);
        const final = msgs.filter((m) => 'result' in m || 'error' in m);
        expect(final, f.kind).toHaveLength(1);
        expectOwed(f, f.owed, final[0]);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? ODD_RUNS), seed: Number(process.env.FUZZ_SEED ?? 20260728), endOnFailure: true },
    );
    // Every kind of frame was sent (the mix is no accident of the seed), unless FUZZ_RUNS asked for fewer frames than these runs' own.
    if (Number(process.env.FUZZ_RUNS ?? ODD_RUNS) >= ODD_RUNS) expect(seen.size).toBe(11 + 11 + 4);
    // Still serving: a real call of each upstream, and nothing unhandled in its log.
    for (const tool of ECHO_TOOLS) {
      const r = await modernFetch(hub.url, tool);
      expect(r.result?.structuredContent, tool).toMatchObject({ args: { ok: 1 } });
    }
    expect((await healthOf(hub.url)).status).toBe('ok');
    expect(hub.stdout()).toBe('');
    expect(hub.logs.filter((l) => /request handler failed|unexpected error while handling/.test(l))).toEqual([]);
  }, 300_000);
});

/** A modern tools/call of `tool` with arguments {ok: 1}, its answer. */
async function modernFetch(url: string, tool: string): Promise<RpcMessage> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': tool },
    body: JSON.stringify(oddRequest('modern', 'after', 'tools/call', { name: tool, arguments: { ok: 1 } })),
  });
  return parseMessages(res.headers.get('content-type'), await res.text()).find((m) => m.id === 'after')!;
}

describe('odd frames get their era’s answer over switchyard stdio', () => {
  let hub: StdioHub;
  let proc: ChildProcess;
  let lines: string[];
  let answerTo: StdioHub['answerTo'];

  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-odd-stdio-'));
    ({ proc, lines, answerTo } = hub = spawnStdioHub(dir, oddConfigFor(dir)));
    // A legacy session on this process (at 2025-11-25, which has no batches), so that both eras' frames are served.
    const init = answerTo('init', 45_000);
    proc.stdin!.write(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'odd', version: '1' } } }) + '\n');
    expect((await init).result).toMatchObject({ protocolVersion: LEGACY });
    proc.stdin!.write(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) + '\n');
  }, 60_000);

  afterAll(async () => expect(await hub.stop()).toBe(0));

  it('the code and id of each era on stdout, nothing there but JSON-RPC, foreign _meta keys forwarded', async () => {
    let n = 0;
    const seen = new Set<string>();
    await fc.assert(
      fc.asyncProperty(fc.oneof(oddFrames('modern'), oddFrames('legacy')).filter((f) => !f.httpOnly), async (f) => {
        n++;
        seen.add(`${f.era} ${f.kind}`);
        const owed = f.stdioOwed ?? f.owed;
        const from = lines.length;
        // A frame without a readable id is answered before the line after it (the sentinel) is.
        const own = owed.id !== undefined ? answerTo(owed.id) : undefined;
        const done = answerTo(`odd-sentinel-${n}`);
        proc.stdin!.write(f.text + '\n' + JSON.stringify(oddRequest('modern', `odd-sentinel-${n}`, 'tools/list')) + '\n');
        await done;
        const answered = own
          ? await own
          : lines
              .slice(from)
              .map((l) => JSON.parse(l) as RpcMessage)
              .find((m) => ('result' in m || 'error' in m) && m.id === undefined);
        if (owed.none) {
          expect(answered, `${f.kind}: ${f.text}`).toBeUndefined();
          return;
        }
        expectOwed(f, owed, answered);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? ODD_RUNS), seed: Number(process.env.FUZZ_SEED ?? 20260728), endOnFailure: true },
    );
    // Every kind of frame but the two about HTTP headers was sent.
    if (Number(process.env.FUZZ_RUNS ?? ODD_RUNS) >= ODD_RUNS) expect(seen.size).toBe(11 + 11 + 4 - 2);
    // Every line the hub wrote is one JSON-RPC message; it still serves a call.
    for (const line of lines) checkMessage(JSON.parse(line) as RpcMessage);
    const after = answerTo('after');
    proc.stdin!.write(JSON.stringify(oddRequest('legacy', 'after', 'tools/call', { name: 'qm__echo', arguments: { ok: 1 } })) + '\n');
    expect((await after).result?.structuredContent).toMatchObject({ args: { ok: 1 } });
    expect(proc.exitCode).toBeNull();
    expect(hub.stderr()).not.toMatch(/unexpected error while handling|request handler failed/);
  }, 300_000);
});

/** `switchyard stdio` on a config written to `dir`: its stdout lines, each request's answer by id, its stderr. */
interface StdioHub {
  proc: ChildProcess;
  lines: string[];
  answerTo(rid: string | number, ms?: number): Promise<RpcMessage>;
  stderr(): string;
  /** Ends stdin (the client left); the exit code. */
  stop(): Promise<number | null>;
}

function spawnStdioHub(dir: string, config: unknown): StdioHub {
  const file = join(dir, 'hub.config.json');
  writeFileSync(file, JSON.stringify(config));
  const proc = spawn(process.execPath, [BIN, 'stdio', '--config', file], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const waiters = new Map<string, (m: RpcMessage) => void>();
  let stderr = '';
  proc.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-200_000)));
  let buf = '';
  proc.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      lines.push(line);
      let m: RpcMessage | undefined;
      try {
        m = JSON.parse(line) as RpcMessage;
      } catch {
        continue;
      }
      const w = waiters.get(JSON.stringify(m.id ?? null));
      if (w && ('result' in m || 'error' in m)) w(m);
    }
  });
  const answerTo = (rid: string | number, ms = 15_000): Promise<RpcMessage> => {
    const key = JSON.stringify(rid);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        waiters.delete(key);
        reject(new Error(`no answer to ${key} within ${ms} ms`));
      }, ms);
      waiters.set(key, (m) => {
        clearTimeout(t);
        waiters.delete(key);
        resolve(m);
      });
    });
  };
  const stop = (): Promise<number | null> => {
    proc.stdin!.end();
    return new Promise((r) => (proc.exitCode !== null ? r(proc.exitCode) : proc.once('exit', (c) => r(c))));
  };
  return { proc, lines, answerTo, stderr: () => stderr, stop };
}
