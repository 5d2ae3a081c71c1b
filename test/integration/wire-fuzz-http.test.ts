/**
 * The hub's downstream wire over loopback HTTP, both eras, as properties whose oracle is the
 * protocol (digest §1.3, §6.2, §6.3; README's protocol notes and ledger): odd ids as raw number
 * text, unicode and NUL in ids, duplicate keys, deep nesting, notifications with ids, a client's
 * responses, the other era's methods, headers that disagree with the body, media types, batches
 * (a 2025-03-26 session's only), and bodies that come slowly or never whole. Each answer has its
 * era's status, code and id (the id sent, or none when unreadable); a notification and a client's
 * response get nothing; every request has exactly one ledger row; the hub stays up and serves.
 * faults-fuzz.test.ts covers random mutations and the bare -32700/-32600/-32602 kinds.
 */
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { healthOf, waitForState } from './faults-helpers.js';
import { rowsThrough } from './ledger-helpers.js';
import {
  answerProblem,
  batchFrames,
  BATCHES,
  DELETE,
  eraHeaders,
  frames,
  headerFrames,
  isFinal,
  LEGACY,
  MAX_BODY,
  MODERN,
  request,
  statusOk,
  wellFormed,
  type Frame,
  type FrameOf,
  type Msg,
} from './wire-frames.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 400);
const SEED = Number(process.env.FUZZ_SEED ?? 70_2026);

let hub: HubProcess;
let db: string;
const sessions: Record<string, string> = {};

async function initialize(version: string): Promise<string> {
  const res = await fetch(hub.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: `init-${version}`, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'wire-fuzz', version: '1' } } }),
  });
  expect(res.status).toBe(200);
  await res.text();
  const sid = res.headers.get('mcp-session-id')!;
  const done = await fetch(hub.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': version },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  });
  expect(done.status).toBe(202);
  return sid;
}

/** A modern tools/list, answered: what a run ends with, so that every row before it is in. */
async function marker(id: string): Promise<void> {
  const res = await fetch(hub.url, { method: 'POST', headers: eraHeaders('modern', 'tools/list'), body: JSON.stringify(request('modern', id, 'tools/list')) });
  expect(res.status).toBe(200);
  await res.text();
}

function headersFor(f: Frame): Record<string, string> {
  const h: Record<string, string> = {};
  for (const [k, v] of Object.entries(f.headers)) {
    if (v === DELETE) continue;
    h[k] = v.replace(/^\{session:(\w+)\}$/, (_, era: string) => sessions[era]!);
  }
  return h;
}

/** The messages of an answer: one JSON object, a JSON array (a batch's), or SSE events. */
function messagesOf(contentType: string | null, body: string): Msg[] {
  if (body === '') return [];
  if ((contentType ?? '').includes('text/event-stream')) {
    return body
      .split(/\r?\n\r?\n/)
      .map((e) => e.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n'))
      .filter((d) => d !== '')
      .map((d) => JSON.parse(d) as Msg);
  }
  const v = JSON.parse(body) as Msg | Msg[];
  return Array.isArray(v) ? v : [v];
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-wire-http-'));
  db = join(dir, 'ledger.db');
  hub = await startHub(
    { ledger: { path: db }, listen: { maxBodyBytes: MAX_BODY }, servers: { ql: nodeServer('test/fixtures/quirks/legacy-32601.mjs'), qm: nodeServer('test/fixtures/quirks/modern.mjs') } },
    { dir, env: { SWITCHYARD_LOG_LEVEL: 'info' } },
  );
  await waitForState(hub.url, 'ql', ['ready']);
  await waitForState(hub.url, 'qm', ['ready']);
  sessions.legacy = await initialize(LEGACY);
  sessions.batches = await initialize(BATCHES);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

/** Still up and serving: /healthz, a call of each upstream, nothing unhandled in the log, nothing on stdout. */
async function stillServing(): Promise<void> {
  expect(hub.proc.exitCode).toBeNull();
  expect((await healthOf(hub.url)).status).toBe('ok');
  for (const tool of ['ql__echo', 'qm__echo']) {
    const res = await fetch(hub.url, { method: 'POST', headers: eraHeaders('modern', 'tools/call', tool), body: JSON.stringify(request('modern', `after-${tool}`, 'tools/call', { name: tool, arguments: { ok: 1 } })) });
    const [m] = messagesOf(res.headers.get('content-type'), await res.text());
    expect(m?.result, tool).toMatchObject({ structuredContent: { args: { ok: 1 } } });
  }
  expect(hub.stdout()).toBe('');
  expect(hub.logs.filter((l) => /request handler failed|unexpected error while handling|uncaught|unhandled/i.test(l))).toEqual([]);
}

describe('frames of both eras over HTTP', () => {
  it('each gets its era’s status, code and id (or nothing), and exactly one ledger row per request', async () => {
    await marker('wire-start');
    const before = (await rowsThrough(db, 'wire-start')).length;
    let n = 0;
    let rows = 0;
    const rowIds: string[] = [];
    const rowChecks: [string, NonNullable<Frame['rowCheck']>][] = [];
    const seen = new Set<string>();
    const kinds: string[] = [];
    const eras = ['modern', 'legacy', 'batches'] as const;
    const all = fc.oneof(...eras.map(frames), ...eras.map(headerFrames), ...eras.map(batchFrames));
    await fc.assert(
      fc.asyncProperty(all, fc.boolean(), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 3 }), async (of: FrameOf, chunked, cuts) => {
        const f = of(`h${++n}`);
        seen.add(`${f.era} ${f.kind}`);
        rows += f.rows;
        for (let i = 0; i < f.rows; i++) kinds.push(`${f.era} ${f.kind} ${f.owed.status} ${f.owed.code}`);
        if (f.rowId !== undefined) rowIds.push(f.rowId);
        if (f.rowId !== undefined && f.rowCheck) rowChecks.push([f.rowId, f.rowCheck]);
        const where = `${f.kind} (${f.era}): ${f.text.slice(0, 300)} ${JSON.stringify(f.headers)}`;
        // The fast path reads a POST with a Content-Length; one with a chunked body goes to
        // node:http (transport/http1/head.ts): every frame is owed the same answer on both.
        const res = chunked ? await chunkedPost(headersFor(f), Buffer.from(f.text), cuts) : await fetch(hub.url, { method: 'POST', headers: headersFor(f), body: f.text, signal: AbortSignal.timeout(15_000) });
        const body = await res.text();
        // Up after every frame, not only at the end: a frame that ended it is the one named.
        expect(hub.proc.exitCode, where).toBeNull();
        expect((await fetch(new URL('/healthz', hub.url))).status, where).toBe(200);
        expect(statusOk(f.owed, res.status), `${where} → ${res.status} ${body.slice(0, 300)}`).toBe(true);
        if (f.owed.none) return void expect(body, where).toBe('');
        const msgs = messagesOf(res.headers.get('content-type'), body);
        for (const m of msgs) expect(wellFormed(m), where).toBeNull();
        const finals = msgs.filter(isFinal);
        if (f.owed.members) {
          // A batch's answers: one for each request in it, by id (an unreadable id's has none).
          expect(finals.length, `${where} → ${body.slice(0, 500)}`).toBe(f.owed.members.length);
          for (const o of f.owed.members) {
            const m = finals.find((x) => x.id === o.id && (o.id !== undefined || x.error?.code === o.code));
            expect(answerProblem(o, m), `${where} member ${JSON.stringify(o)} → ${body.slice(0, 500)}`).toBeNull();
          }
          return;
        }
        expect(finals.length, `${where} → ${body.slice(0, 300)}`).toBe(1);
        expect(answerProblem(f.owed, finals[0]), `${where} → ${body.slice(0, 300)}`).toBeNull();
        if (f.check) expect(f.check(finals[0]!), where).toBeNull();
        if (f.checkHeaders) expect(f.checkHeaders((name) => res.headers.get(name)), where).toBeNull();
        // Progress and log lines come on a stream only, before the answer.
        if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) expect(msgs.length, where).toBe(1);
      }),
      { numRuns: RUNS, seed: SEED, endOnFailure: true },
    );
    if (!process.env.FUZZ_RUNS) expect(seen.size).toBeGreaterThan(40);
    await marker('wire-end');
    const after = await rowsThrough(db, 'wire-end');
    // Exactly one row a request: by its id where it had a string one of its own, and in all.
    const byId = new Map<string, number>();
    for (const r of after) if (r.requestIdType === 'string') byId.set(String(r.requestId), (byId.get(String(r.requestId)) ?? 0) + 1);
    const wrong = rowIds.filter((id) => byId.get(id) !== 1).map((id) => [id, byId.get(id) ?? 0]);
    expect(wrong).toEqual([]);
    expect(rowChecks.map(([id, check]) => check(after.find((r) => r.requestId === id)!)).filter((p) => p !== null)).toEqual([]);
    // On a miscount, the rows by method and outcome beside the frames by kind say which kind it was.
    const tally = (xs: string[]): string => JSON.stringify(Object.entries(xs.reduce<Record<string, number>>((a, x) => ((a[x] = (a[x] ?? 0) + 1), a), {})).sort());
    expect(after.length - before, `rows ${tally(after.slice(before).map((r) => `${r.method} ${r.errorCode} ${r.outcome}`))}\nframes ${tally(kinds)}`).toBe(rows + 1);
    await stillServing();
  }, 240_000);
});

/** The HTTP/1.1 responses in `out`, in order (Content-Length or chunked bodies; none for 204/304). */
function responsesIn(out: Buffer): { status: number; contentType: string | null; body: string }[] {
  const list: { status: number; contentType: string | null; body: string }[] = [];
  let rest = out;
  while (rest.length > 0) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) throw new Error(`a response cut short: ${rest.toString('latin1').slice(0, 200)}`);
    const lines = rest.subarray(0, end).toString('latin1').split('\r\n');
    const fields = new Map(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
    const status = Number(lines[0]!.split(' ')[1]);
    rest = rest.subarray(end + 4);
    let body: Buffer;
    if (/chunked/i.test(fields.get('transfer-encoding') ?? '')) {
      const parts: Buffer[] = [];
      for (;;) {
        const eol = rest.indexOf('\r\n');
        const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
        rest = rest.subarray(eol + 2);
        if (!(size > 0)) {
          rest = rest.subarray(rest.indexOf('\r\n') + 2);
          break;
        }
        parts.push(rest.subarray(0, size));
        rest = rest.subarray(size + 2);
      }
      body = Buffer.concat(parts);
    } else {
      const n = Number(fields.get('content-length') ?? 0);
      body = rest.subarray(0, n);
      rest = rest.subarray(n);
    }
    list.push({ status, contentType: fields.get('content-type') ?? null, body: body.toString('utf8') });
  }
  return list;
}

describe('frames pipelined on one connection', () => {
  it('each answered in its turn with what it is owed, refusals (415, 406, 404 …) among them', async () => {
    let n = 0;
    const eras = ['modern', 'legacy'] as const;
    const one = fc.oneof(...eras.map(frames), ...eras.map(headerFrames));
    await fc.assert(
      fc.asyncProperty(fc.array(one, { minLength: 2, maxLength: 6 }), fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 4 }), async (ofs, cuts) => {
        const fs = ofs.map((of) => of(`p${++n}`));
        const wire = Buffer.concat(
          fs.map((f, i) => {
            const body = Buffer.from(f.text);
            const h = { ...headersFor(f), host: `127.0.0.1:${hub.port}`, 'content-length': String(body.length), ...(i === fs.length - 1 ? { connection: 'close' } : {}) };
            return Buffer.concat([Buffer.from(`POST /mcp HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`, 'latin1'), body]);
          }),
        );
        const out = Buffer.from(await rawExchange(split(wire, cuts), [], 'wait'), 'latin1');
        const where = fs.map((f) => `${f.kind} (${f.era})`).join(' | ');
        const answers = responsesIn(out);
        expect(answers.length, where).toBe(fs.length);
        fs.forEach((f, i) => {
          const a = answers[i]!;
          const w = `#${i} ${f.kind} (${f.era}) of ${where}: ${a.status} ${a.body.slice(0, 200)}`;
          expect(statusOk(f.owed, a.status), w).toBe(true);
          if (f.owed.none) return void expect(a.body, w).toBe('');
          const finals = messagesOf(a.contentType, a.body).filter(isFinal);
          if (f.owed.members) return void expect(finals.length, w).toBe(f.owed.members.length);
          expect(answerProblem(f.owed, finals[0]), w).toBeNull();
        });
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 80), seed: SEED, endOnFailure: true },
    );
    await stillServing();
  }, 120_000);
});

describe('examples the properties found', () => {
  it('a batch refused whole records no row under an id no request can have (1.5, 2^53 + 1 read as 2^53)', async () => {
    const meta = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
    // The raw text: 9007199254740993 is read as 9007199254740992, an id the client never sent.
    const text = `[{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"qm__echo","_meta":${JSON.stringify(meta)}}},{"jsonrpc":"2.0","id":9007199254740993,"method":"tools/list","params":{"_meta":${JSON.stringify(meta)}}},{"jsonrpc":"2.0","id":"ex-batch-ok","method":"tools/list","params":{"_meta":${JSON.stringify(meta)}}}]`;
    await marker('ex-batch-start');
    const before = (await rowsThrough(db, 'ex-batch-start')).length;
    const res = await fetch(hub.url, { method: 'POST', headers: eraHeaders('modern', undefined), body: text });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { code: -32600 } });
    await marker('ex-batch-end');
    // The one request in it (a string id) has its row; the two members whose ids are of no allowed type are junk, as alone.
    const rows = (await rowsThrough(db, 'ex-batch-end')).slice(before);
    expect(rows.map((r) => [r.requestId, r.method])).toEqual([
      ['ex-batch-ok', 'tools/list'],
      ['ex-batch-end', 'tools/list'],
    ]);
  });
});

describe('a name no header can repeat', () => {
  it('a modern tools/call whose name has a lone surrogate is an unknown tool (-32602, 200), not a header mismatch, whatever its Mcp-Name', async () => {
    const name = 'x\ud800y';
    for (const [i, mcpName] of [`=?base64?${Buffer.from(name, 'utf8').toString('base64')}?=`, 'xy'].entries()) {
      const res = await fetch(hub.url, { method: 'POST', headers: { ...eraHeaders('modern', 'tools/call'), 'mcp-name': mcpName }, body: JSON.stringify(request('modern', `lone-${i}`, 'tools/call', { name, arguments: {} })) });
      const m = (await res.json()) as Msg;
      expect([res.status, m.id, m.error?.code], mcpName).toEqual([200, `lone-${i}`, -32602]);
    }
    // A well-formed name's header is still held to it.
    const res = await fetch(hub.url, { method: 'POST', headers: { ...eraHeaders('modern', 'tools/call'), 'mcp-name': 'xy' }, body: JSON.stringify(request('modern', 'lone-2', 'tools/call', { name: 'x\u00e9y', arguments: {} })) });
    expect([res.status, ((await res.json()) as Msg).error?.code]).toEqual([400, -32020]);
  });
});

/** One request written to a socket by hand, in pieces; what came back (empty when the hub said nothing). */
function rawExchange(pieces: Buffer[], gapsMs: number[], end: 'wait' | 'half-close' | 'destroy'): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(hub.port, '127.0.0.1');
    let out = '';
    // Connection: close: the answer ends with the connection.
    s.on('data', (d) => (out += d.toString('latin1')));
    s.on('error', () => resolve(out));
    s.on('close', () => resolve(out));
    s.once('connect', async () => {
      for (let i = 0; i < pieces.length; i++) {
        s.write(pieces[i]!);
        if (gapsMs[i]) await new Promise((r) => setTimeout(r, gapsMs[i]));
      }
      if (end === 'half-close') s.end();
      else if (end === 'destroy') s.destroy();
    });
  });
}

/** What a raw exchange answered, read as fetch's Response is. */
interface RawAnswer {
  status: number;
  headers: { get(name: string): string | null };
  text(): Promise<string>;
}

/** A POST of `body` as a chunked message, its chunks cut at `cuts`, on a connection of its own. */
async function chunkedPost(headers: Record<string, string>, body: Buffer, cuts: number[]): Promise<RawAnswer> {
  const h: Record<string, string> = { ...headers, host: `127.0.0.1:${hub.port}`, connection: 'close', 'transfer-encoding': 'chunked' };
  const chunks = split(body, cuts).filter((c) => c.length > 0);
  const framed = Buffer.concat([...chunks.flatMap((c) => [Buffer.from(`${c.length.toString(16)}\r\n`), c, Buffer.from('\r\n')]), Buffer.from('0\r\n\r\n')]);
  const head = Buffer.from(`POST /mcp HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`, 'latin1');
  const out = Buffer.from(await rawExchange([head, framed], [], 'wait'), 'latin1');
  const end = out.indexOf('\r\n\r\n');
  const lines = out.subarray(0, end).toString('latin1').split('\r\n');
  const fields = new Map(lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
  let rest = out.subarray(end + 4);
  let payload = rest;
  if (/chunked/i.test(fields.get('transfer-encoding') ?? '')) {
    const parts: Buffer[] = [];
    for (;;) {
      const eol = rest.indexOf('\r\n');
      const size = parseInt(rest.subarray(0, eol).toString('latin1'), 16);
      if (!(size > 0)) break;
      parts.push(rest.subarray(eol + 2, eol + 2 + size));
      rest = rest.subarray(eol + 2 + size + 2);
    }
    payload = Buffer.concat(parts);
  }
  return { status: Number(lines[0]!.split(' ')[1]), headers: { get: (n) => fields.get(n.toLowerCase()) ?? null }, text: async () => payload.toString('utf8') };
}

/** Splits `b` at the given fractions. */
function split(b: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => Math.floor(c * b.length)))].filter((i) => i > 0 && i < b.length).sort((x, y) => x - y);
  const out: Buffer[] = [];
  let from = 0;
  for (const i of at) {
    out.push(b.subarray(from, i));
    from = i;
  }
  out.push(b.subarray(from));
  return out;
}

describe('bodies that come slowly, chunked, or never whole', () => {
  it('a slow or chunked body is served as a whole one; one cut short gets no answer, no row, and breaks nothing', async () => {
    await marker('slow-start');
    const before = (await rowsThrough(db, 'slow-start')).length;
    let n = 0;
    let rows = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('modern', 'legacy'),
        fc.boolean(),
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 5 }),
        fc.array(fc.integer({ min: 0, max: 25 }), { maxLength: 6 }),
        fc.option(fc.double({ min: 0, max: 0.999, noNaN: true }), { nil: undefined }),
        fc.constantFrom<'half-close' | 'destroy'>('half-close', 'destroy'),
        async (era, chunked, cuts, gaps, cutAt, how) => {
          const rid = `slow-${++n}`;
          const body = Buffer.from(JSON.stringify(request(era, rid, 'tools/list')));
          const h: Record<string, string> = { ...eraHeaders(era, 'tools/list'), host: `127.0.0.1:${hub.port}`, connection: 'close' };
          if (era === 'legacy') h['mcp-session-id'] = sessions.legacy!;
          let framed: Buffer;
          if (chunked) {
            h['transfer-encoding'] = 'chunked';
            const parts = split(body, cuts);
            framed = Buffer.concat([...parts.flatMap((p) => [Buffer.from(`${p.length.toString(16)}\r\n`), p, Buffer.from('\r\n')]), Buffer.from('0\r\n\r\n')]);
          } else {
            h['content-length'] = String(body.length);
            framed = body;
          }
          const head = Buffer.from(`POST /mcp HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}`).join('\r\n')}\r\n\r\n`);
          const whole = Buffer.concat([head, framed]);
          // Cut short: the head and part of the body, then the client half-closes or goes away.
          const sent = cutAt === undefined ? whole : whole.subarray(0, head.length + Math.floor(cutAt * (framed.length - (chunked ? 5 : 0))));
          const out = await rawExchange(split(sent, cuts), gaps, cutAt === undefined ? 'wait' : how);
          const where = `${era} ${chunked ? 'chunked' : 'content-length'} cut ${cutAt} ${how}: ${sent.toString('latin1').slice(0, 400)} → ${out.slice(0, 300)}`;
          if (cutAt !== undefined) {
            // Nothing ran: no answer but, at most, HTTP's own refusal of a message it could not read.
            expect(out === '' || /^HTTP\/1\.1 (400|408)/.test(out), where).toBe(true);
            return;
          }
          rows++;
          expect(out, where).toMatch(/^HTTP\/1\.1 200 /);
          const text = out.slice(out.indexOf('\r\n\r\n') + 4);
          const chunkedAnswer = /transfer-encoding: chunked/i.test(out.slice(0, out.indexOf('\r\n\r\n')));
          const payload = chunkedAnswer ? text.replace(/(^|\r\n)[0-9a-f]+\r\n/g, '') : text;
          const m = messagesOf(/text\/event-stream/i.test(out) ? 'text/event-stream' : 'application/json', Buffer.from(payload, 'latin1').toString('utf8').trim()).filter(isFinal);
          expect(answerProblem({ ok: true, id: rid }, m[0]), where).toBeNull();
        },
      ),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 60), seed: SEED, endOnFailure: true },
    );
    await marker('slow-end');
    expect((await rowsThrough(db, 'slow-end')).length - before).toBe(rows + 1);
    await stillServing();
  }, 120_000);
});
