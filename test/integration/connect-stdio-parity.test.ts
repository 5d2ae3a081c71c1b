/**
 * `switchyard connect` answers what it reads as `switchyard stdio` answers the same lines, and
 * what reached the daemon has its row there: a request before initialize, lines that are no
 * JSON-RPC message, an over-long line, a question on a 2025-03-26 batch's stream at stdin EOF.
 * Real processes: the built daemon, `connect` and `stdio`, raw lines over their pipes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LineClient } from '../helpers/line-client.js';
import { queryRows, waitForReady, waitForRows } from './ledger-helpers.js';
import { sha256Hex } from '../helpers/auth.js';

const TL = 'test/fixtures/translation/legacy-server.mjs';
const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';
const ENV = { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' };

let hub: HubProcess;
/** A config of its own for `switchyard stdio` (its own ledger: the daemon holds its one). */
let stdioConfig: string;

const connect = (url = hub.url) => new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', url], { cwd: ROOT, env: ENV }));
const stdio = () => new LineClient(spawn(process.execPath, [BIN, 'stdio', '-c', stdioConfig], { cwd: ROOT, env: ENV }));
const init = (id: string, v = '2025-11-25', capabilities: object = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'initialize',
  params: { protocolVersion: v, capabilities, clientInfo: { name: 'parity', version: '1' } },
});

beforeAll(async () => {
  // A drain shorter than connect's own 5 s default: its EOF drain is the daemon's (DRAIN_MS_HEADER).
  hub = await startHub({ listen: { drainTimeoutMs: 1500 }, servers: { tl: nodeServer(TL), legacy: nodeServer(SDK1) } });
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-stdio-'));
  stdioConfig = join(dir, 'hub.config.json');
  writeFileSync(stdioConfig, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: { tl: nodeServer(TL) } }));
  await waitForReady(hub.url, ['tl', 'legacy']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

describe('stdio at stdin EOF', () => {
  // Its own stop closed the server while the hub listed its tools: "tools list … failed" at
  // warning level went to the client's log at every quick exit.
  it('says nothing at warning level of a tools list its own stop cut short', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-stdio-'));
    const config = join(dir, 'hub.config.json');
    const slow = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', LIST_DELAY_MS: '5000' });
    writeFileSync(config, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: { slow } }));
    const c = new LineClient(spawn(process.execPath, [BIN, 'stdio', '-c', config], { cwd: ROOT, env: ENV }));
    try {
      expect((await c.request(init('i'), 20_000)).result.protocolVersion).toBe('2025-11-25');
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(c.stderr, c.stderr).toBe('');
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect answers as stdio does', () => {
  // The daemon's HTTP words ("Mcp-Session-Id header is required") sent a stdio client looking
  // for a header it cannot send.
  it('a request before initialize: -32600 "not initialized", with its id and a row at the daemon; a notification before it is dropped quietly', async () => {
    const early = { jsonrpc: '2.0', id: 'early-list', method: 'tools/list' };
    const answers: Record<string, unknown>[] = [];
    for (const c of [stdio(), connect()]) {
      try {
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        answers.push(await c.request(early, 20_000));
        expect((await c.request(init('i'), 20_000)).result.protocolVersion).toBe('2025-11-25');
        c.endInput();
        expect(await c.exited).toBe(0);
        expect(c.stderr, c.stderr).toBe("");
      } finally {
        c.kill();
      }
    }
    expect(answers[0]).toEqual({ jsonrpc: '2.0', id: 'early-list', error: { code: -32600, message: 'not initialized: send initialize first' } });
    expect(answers[1]).toEqual(answers[0]);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'early-list' });
    expect(rows.map((r) => [r.method, r.outcome])).toEqual([['tools/list', 'rpc_error']]);
  }, 40_000);

  // connect answered it itself (the daemon held no session to put it in): the client got {}
  // and the daemon never saw it, where `stdio` records it.
  it('a ping before initialize: answered {}, and recorded at the daemon as stdio records it', async () => {
    const answers: Record<string, unknown>[] = [];
    for (const c of [stdio(), connect()]) {
      try {
        answers.push(await c.request({ jsonrpc: '2.0', id: 'early-ping', method: 'ping' }, 20_000));
        expect((await c.request(init('i'), 20_000)).result.protocolVersion).toBe('2025-11-25');
      } finally {
        c.kill();
      }
    }
    expect(answers).toEqual([
      { jsonrpc: '2.0', id: 'early-ping', result: {} },
      { jsonrpc: '2.0', id: 'early-ping', result: {} },
    ]);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'early-ping' });
    expect(rows.map((r) => [r.method, r.outcome, r.clientEra])).toEqual([['ping', 'ok', '2025-11-25']]);
    // Over HTTP as the bridge sends it: no session named, answered; one naming a session that ended, 404.
    const ping = (headers: Record<string, string>) => fetch(hub.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify({ jsonrpc: '2.0', id: 'raw-ping', method: 'ping' }) });
    const bare = await ping({});
    expect([bare.status, await bare.json()]).toEqual([200, { jsonrpc: '2.0', id: 'raw-ping', result: {} }]);
    expect((await ping({ 'mcp-session-id': 'no-such-session' })).status).toBe(404);
  }, 40_000);

  // connect sent the batch whole and answered the cancelled member itself, -32603 "the hub ended
  // the answer stream without a response": a request its client cancelled is owed no answer (MCP).
  it('a 2025-03-26 batch member cancelled later in the same batch: not answered, as stdio answers it', async () => {
    const lines: unknown[][] = [];
    for (const c of [stdio(), connect()]) {
      try {
        await c.request(init('i', '2025-03-26'), 20_000);
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        c.send(
          JSON.stringify([
            { jsonrpc: '2.0', id: 'in-batch-cancelled', method: 'tools/call', params: { name: 'tl__echo', arguments: { text: 'x' } } },
            { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'in-batch-cancelled', reason: 'changed my mind' } },
            { jsonrpc: '2.0', id: 'in-batch-ping', method: 'ping' },
          ]),
        );
        // Lines are answered in order here: the batch's line comes before this ping's.
        await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' }, 20_000);
        await expect.poll(() => c.nonProtocolLines.length, { timeout: 10_000 }).toBeGreaterThan(0);
        lines.push(c.nonProtocolLines.map((l) => JSON.parse(l) as unknown));
      } finally {
        c.kill();
      }
    }
    expect(lines[0]).toEqual([[{ jsonrpc: '2.0', id: 'in-batch-ping', result: {} }]]);
    expect(lines[1]).toEqual(lines[0]);
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'in-batch-cancelled' });
    expect(rows.map((r) => r.outcome)).toEqual(['cancelled']);
  }, 40_000);

  // JSON-RPC answers no notification, one whose params came by position too (a valid JSON-RPC
  // notification no MCP method takes): stdio records it and writes nothing; connect wrote the
  // daemon's HTTP 400 body to its client as an answer.
  it('a notification whose params come by position: not answered, and recorded at the daemon, as stdio records it', async () => {
    const seen: unknown[][] = [];
    const ledgers = [join(dirname(stdioConfig), 'ledger.db'), join(hub.dir, 'ledger.db')];
    for (const [i, c] of [stdio(), connect()].entries()) {
      try {
        await c.request(init('i'), 20_000);
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/roots/list_changed', params: ['by-position'] }));
        // Recorded (its refusal is written once its row is), then a round trip after it.
        const rows = await waitForRows(ledgers[i]!, { method: 'notifications/roots/list_changed' });
        expect(rows.map((r) => [r.outcome, r.errorCode])).toEqual([['rpc_error', -32602]]);
        await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' }, 20_000);
        seen.push([...c.received.filter((m) => m.id !== 'i' && m.id !== 'after'), ...c.nonProtocolLines]);
      } finally {
        c.kill();
      }
    }
    expect(seen).toEqual([[], []]);
  }, 40_000);

  // They were answered by connect itself: no row anywhere, and a malformed answer got an error
  // JSON-RPC never gives (stdio drops it).
  it('lines that are no JSON-RPC message: the same answers, and each reached the daemon, with its row', async () => {
    const lines = ['this is no json', JSON.stringify({ jsonrpc: '2.0', id: 'bad-method', method: 7 }), JSON.stringify({ jsonrpc: '2.0', id: 'bad-answer', result: 7 })];
    const seen: Record<string, unknown>[][] = [];
    for (const c of [stdio(), connect()]) {
      try {
        await c.request(init('i'), 20_000);
        c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
        for (const l of lines) c.send(l);
        // Lines are served concurrently: the ping answered last says the others were.
        await c.next((m) => m.error?.code === -32700);
        await c.next((m) => m.id === 'bad-method');
        await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' });
        seen.push(c.received.filter((m) => m.error !== undefined).sort((a, b) => String(a.id).localeCompare(String(b.id))));
      } finally {
        c.kill();
      }
    }
    expect(seen[0]).toEqual([
      { jsonrpc: '2.0', id: 'bad-method', error: { code: -32600, message: 'not a request, notification or response' } },
      { jsonrpc: '2.0', error: { code: -32700, message: 'parse error: invalid JSON' } },
    ]);
    expect(seen[1]).toEqual(seen[0]);
    const db = join(hub.dir, 'ledger.db');
    const rows = await waitForRows(db, { method: '(invalid)' }, (r) => r.length >= 2);
    expect(rows.map((r) => [r.requestId, r.errorMessage]).sort()).toEqual([
      ['', 'parse error: invalid JSON'],
      ['bad-method', 'not a request, notification or response'],
    ]);
    // The malformed answer answers no question: dropped, no row (as stdio).
    expect(await queryRows(db, { 'request-id': 'bad-answer' })).toEqual([]);
  }, 40_000);

  // It answered such a line with no id: a request's client waited out its own timeout.
  it("a line longer than connect reads is answered with the id one of its ends shows, as stdio answers one past listen.maxBodyBytes", async () => {
    const c = connect();
    try {
      await c.request(init('i'), 20_000);
      const limit = 64 * 1024 * 1024;
      const huge = `{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"name":"tl__echo","arguments":{"text":"${'x'.repeat(limit)}"}}}`;
      const answer = c.next((m) => m.id === 'huge' || (m.error !== undefined && m.id === undefined), 30_000);
      c.send(huge);
      expect(await answer).toEqual({ jsonrpc: '2.0', id: 'huge', error: { code: -32600, message: `message too large: the limit is ${limit} bytes per line` } });
      // Read on after it.
      expect((await c.request({ jsonrpc: '2.0', id: 'after', method: 'ping' })).result).toEqual({});
      // Its log line (written asynchronously) says what was refused, the daemon never seeing it.
      await expect.poll(() => c.stderr, { timeout: 5_000 }).toContain('refused unread');
    } finally {
      c.kill();
    }
  }, 60_000);
});

describe("connect and a client's answer too long to read", () => {
  // Left to the daemon, the question would have waited policy.inputTimeoutMs for an answer given.
  it('fails the question it answers at once: the call that asked ends with the reason', async () => {
    const c = connect();
    try {
      await c.request(init('i', '2025-11-25', { elicitation: {} }), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'asks', method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who: 'too-long' } } }));
      const q = await c.next((m) => m.method === 'elicitation/create' && String(m.params?.message).includes('too-long'), 20_000);
      const answer = `{"jsonrpc":"2.0","id":${JSON.stringify(q.id)},"result":{"action":"accept","content":{"name":"${'n'.repeat(64 * 1024 * 1024)}"}}}`;
      const final = c.next((m) => m.id === 'asks' && m.method === undefined, 30_000);
      c.send(answer);
      expect(JSON.stringify(await final)).toContain("the client's answer was a line larger than switchyard connect reads (67108864 bytes)");
      // Nothing is owed for an answer: no error line of its own.
      expect(c.received.filter((m) => m.id === q.id && m.method === undefined)).toEqual([]);
    } finally {
      c.kill();
    }
  }, 60_000);
});

describe('connect stopped by a signal', () => {
  // The official stdio client closes stdin, waits 2 s, then sends SIGTERM: connect took that
  // first signal for a second one, exited 1 at once, the call unanswered and running on at the
  // daemon, its session left open. `stdio` ends what still runs then, answered, and exits 0.
  it('after stdin EOF, the first SIGTERM ends what still runs at once: answered, cancelled at the daemon, exit 0', async () => {
    const c = connect();
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow-at-stop', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 30_000 }, _meta: { progressToken: 'p' } } }));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'p', 20_000);
      c.endInput();
      // Still draining (the call has 30 s to go): the client's next step.
      await new Promise((r) => setTimeout(r, 300));
      c.proc.kill('SIGTERM');
      expect(await c.exited).toBe(0);
      expect(c.received.find((m) => m.id === 'slow-at-stop')?.error).toEqual({
        code: -32603,
        message: 'switchyard connect was stopped (SIGTERM) while the request was in flight: it was cancelled at the hub (it may have been carried out in part)',
      });
      expect(c.stderr).not.toContain('second stop signal');
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'slow-at-stop' }, (r) => r.some((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => [r.outcome, r.errorMessage])).toEqual([['cancelled', expect.stringContaining('switchyard connect was stopped (SIGTERM)')]]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect stopped with a request id sent twice', () => {
  // The second request under an id in flight (refused by the daemon) took the first's place in
  // the bridge's table: the stop answered neither, and the first ran on at the daemon.
  it('the first request under an id still answers at the stop, and is cancelled at the daemon', async () => {
    const c = connect();
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const slow = { jsonrpc: '2.0', id: 'sent-twice', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 30_000 }, _meta: { progressToken: 'twice' } } };
      c.send(JSON.stringify(slow));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'twice', 20_000);
      c.send(JSON.stringify(slow));
      expect((await c.next((m) => m.id === 'sent-twice', 20_000)).error?.message).toMatch(/already in flight/);
      c.proc.kill('SIGTERM');
      expect(await c.exited).toBe(0);
      expect(c.received.filter((m) => m.id === 'sent-twice').map((m) => m.error?.message.slice(0, 40))).toEqual(['request id "sent-twice" is already in fl', 'switchyard connect was stopped (SIGTERM)']);
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'sent-twice' }, (r) => r.length >= 2 && r.every((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => r.outcome).sort()).toEqual(['cancelled', 'rpc_error']);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect read after a stop signal', () => {
  /**
   * A daemon of the test's that answers initialize (unless `holdInitialize`), tools/list and
   * notifications/initialized, and holds open tools/call and the cancellation a stop sends,
   * which holds the bridge's drain open for the whole of its second. `seen`: the methods posted.
   */
  async function heldDaemon(holdInitialize = false): Promise<{ url: string; seen: string[]; close(): void }> {
    const seen: string[] = [];
    const server = createServer((req, res) => {
      if (req.method === 'DELETE') return void res.writeHead(200).end();
      if (req.method !== 'POST') return void res.writeHead(405).end();
      let body = '';
      req.on('data', (d: Buffer) => (body += d));
      req.on('end', () => {
        const msg = JSON.parse(body) as { id?: unknown; method?: string };
        seen.push(String(msg.method));
        const json = (headers: Record<string, string>, result: unknown) => res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }));
        if (msg.method === 'initialize' && !holdInitialize) return json({ 'mcp-session-id': 's-1' }, { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'held', version: '1' } });
        if (msg.method === 'tools/list') return json({}, { tools: [] });
        if (msg.method === 'notifications/initialized') return void res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return {
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
      seen,
      close: () => {
        server.closeAllConnections();
        server.close();
      },
    };
  }
  const STOPPING = { code: -32603, message: 'switchyard connect is stopping (SIGTERM): the request was not sent to the hub' };

  // In the second it drains after a signal, a line read was still sent on: its call ran at the
  // daemon as the bridge ended, and one read once the bridge closed got no answer. Now each
  // request read after the signal is answered, not sent, as `stdio` refuses what it reads while
  // it stops.
  it('a request read while connect drains after SIGTERM is answered -32603 and never sent', async () => {
    const daemon = await heldDaemon();
    const c = connect(daemon.url);
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'running', method: 'tools/call', params: { name: 'x', arguments: {} } }));
      await expect.poll(() => daemon.seen.includes('tools/call'), { timeout: 10_000 }).toBe(true);
      c.proc.kill('SIGTERM');
      // Answered as the stop begins: from then on a request is not sent.
      await c.next((m) => m.id === 'running', 10_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'late', method: 'tools/list' }));
      c.send(JSON.stringify([{ jsonrpc: '2.0', id: 'late-batch', method: 'tools/list' }]));
      expect(await c.next((m) => m.id === 'late', 10_000)).toEqual({ jsonrpc: '2.0', id: 'late', error: STOPPING });
      expect(await c.exited).toBe(0);
      // A batch's answers are one line holding their array.
      expect(c.nonProtocolLines.map((l) => JSON.parse(l) as unknown)).toContainEqual([{ jsonrpc: '2.0', id: 'late-batch', error: STOPPING }]);
      expect(daemon.seen).not.toContain('tools/list');
    } finally {
      c.kill();
      daemon.close();
    }
  }, 40_000);

  // A line read behind an initialize waits for its answer (it carries the session id): one
  // still waiting when the stop came was sent once the initialize ended, into a bridge closing,
  // and got no answer. It is answered as one read after the signal is, as `stdio` refuses the
  // lines it holds behind an initialize when it stops.
  it('a request waiting behind an initialize when SIGTERM comes is answered -32603 and never sent', async () => {
    const daemon = await heldDaemon(true);
    const c = connect(daemon.url);
    try {
      c.send(JSON.stringify(init('i')));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'queued', method: 'tools/list' }));
      await expect.poll(() => daemon.seen.includes('initialize'), { timeout: 10_000 }).toBe(true);
      c.proc.kill('SIGTERM');
      expect(await c.exited).toBe(0);
      expect(c.received.find((m) => m.id === 'queued')).toEqual({ jsonrpc: '2.0', id: 'queued', error: STOPPING });
      expect(daemon.seen).not.toContain('tools/list');
    } finally {
      c.kill();
      daemon.close();
    }
  }, 40_000);
});

describe('connect hung up on', () => {
  it('SIGHUP stops it as SIGTERM does: what runs is answered and cancelled at the daemon, exit 0', async () => {
    const c = connect();
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow-at-hup', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 30_000 }, _meta: { progressToken: 'h' } } }));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'h', 20_000);
      c.proc.kill('SIGHUP');
      expect(await c.exited).toBe(0);
      expect(c.received.find((m) => m.id === 'slow-at-hup')?.error?.message).toContain('switchyard connect was stopped (SIGHUP)');
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'slow-at-hup' }, (r) => r.some((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => r.outcome)).toEqual(['cancelled']);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect at stdin EOF', () => {
  // As `stdio` ends what its drain left: it was cut off with no answer, and the daemon ended it
  // only as its session's DELETE came. The drain is the daemon's listen.drainTimeoutMs, as
  // `stdio`'s is (it was a fixed 5 s).
  it("answers a request still running when its drain (the daemon's listen.drainTimeoutMs) runs out, cancelled at the daemon with that reason", async () => {
    const c = connect();
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify({ jsonrpc: '2.0', id: 'slow-at-eof', method: 'tools/call', params: { name: 'legacy__slow', arguments: { ms: 30_000 }, _meta: { progressToken: 'q' } } }));
      await c.next((m) => m.method === 'notifications/progress' && m.params?.progressToken === 'q', 20_000);
      c.endInput();
      expect(await c.exited).toBe(0);
      const why = "the client closed switchyard connect's stdin, and the request was still in flight 1.5 s later: it was cancelled at the hub (it may have been carried out in part)";
      expect(c.received.find((m) => m.id === 'slow-at-eof')?.error).toEqual({ code: -32603, message: why });
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'slow-at-eof' }, (r) => r.some((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => [r.outcome, r.errorMessage])).toEqual([['cancelled', expect.stringContaining('still in flight 1.5 s later')]]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect and a question on a 2025-03-26 batch stream', () => {
  // As `stdio` ends it: the answer could only come on stdin. connect waited out its 5 s drain.
  it('at stdin EOF ends the member that asked at once, its error among the batch answers, recorded cancelled', async () => {
    const c = connect();
    try {
      await c.request(init('i', '2025-03-26', { elicitation: {} }), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      c.send(JSON.stringify([{ jsonrpc: '2.0', id: 'batch-asks', method: 'tools/call', params: { name: 'tl__elicit_form', arguments: { who: 'batch-eof' } } }]));
      await c.next((m) => m.method === 'elicitation/create' && String(m.params?.message).includes('batch-eof'), 20_000);
      const t0 = Date.now();
      c.endInput();
      expect(await c.exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(4_000);
      const batch = c.nonProtocolLines.filter((l) => l.startsWith('[')).map((l) => JSON.parse(l));
      expect(batch).toEqual([
        [{ jsonrpc: '2.0', id: 'batch-asks', error: { code: -32603, message: 'the client closed its input (stdin) while it was asked elicitation/create, so no answer can come' } }],
      ]);
      const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'batch-asks' }, (r) => r.some((x) => x.outcome !== 'in_flight'));
      expect(rows.map((r) => [r.outcome, r.errorMessage])).toEqual([['cancelled', expect.stringContaining('closed its input')]]);
    } finally {
      c.kill();
    }
  }, 40_000);
});

describe('connect and a daemon taking bodies larger than its own bound', () => {
  let big: HubProcess;
  beforeAll(async () => {
    big = await startHub({ listen: { maxBodyBytes: 80 * 1024 * 1024 }, servers: {} });
  }, 60_000);
  afterAll(async () => {
    await big?.stop();
  });

  // It refused every line past 64 MiB, whatever listen.maxBodyBytes said.
  it('reads lines up to the limit the daemon said on its initialize answer (listen.maxBodyBytes)', async () => {
    const c = connect(big.url);
    try {
      await c.request(init('i'), 20_000);
      c.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
      const line = `{"jsonrpc":"2.0","id":"large","method":"ping","params":{"pad":"${'y'.repeat(65 * 1024 * 1024)}"}}`;
      const answer = c.next((m) => m.id === 'large', 60_000);
      c.send(line);
      expect(await answer).toEqual({ jsonrpc: '2.0', id: 'large', result: {} });
    } finally {
      c.kill();
    }
  }, 90_000);
});

describe('connect and a daemon that refuses its key', () => {
  let authed: HubProcess;
  beforeAll(async () => {
    authed = await startHub({ auth: { apiKeys: [{ principal: 'me', sha256: sha256Hex('the-right-key') }] }, servers: {} });
  }, 60_000);
  afterAll(async () => {
    await authed?.stop();
  });

  // It exited 0: an IDE's log showed a server that ended normally, its key wrong or missing.
  it('exits 1 saying the credential was refused when the daemon served none of its requests; 0 with the right key', async () => {
    const run = async (key: string | undefined) => {
      const env: NodeJS.ProcessEnv = { ...ENV, SWITCHYARD_API_KEY: key };
      if (key === undefined) delete env.SWITCHYARD_API_KEY;
      const c = new LineClient(spawn(process.execPath, [BIN, 'connect', '--url', authed.url], { cwd: ROOT, env }));
      try {
        const r = await c.request(init('i'), 20_000);
        c.endInput();
        return { r, code: await c.exited, stderr: c.stderr };
      } finally {
        c.kill();
      }
    };
    const wrong = await run('not-the-key');
    expect(wrong.r.error.message).toContain('(pass --key, or set SWITCHYARD_API_KEY)');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(`switchyard connect: the daemon at ${authed.url} refused this bridge's credential (${wrong.r.error.message.replace(' (pass --key, or set SWITCHYARD_API_KEY)', '')}): pass --key, or set SWITCHYARD_API_KEY\n`);
    expect(wrong.stderr).not.toContain('not-the-key');
    // No key at all: "refused this bridge's credential" sent the user looking for a wrong one.
    const none = await run(undefined);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(`switchyard connect: the daemon at ${authed.url} wants a credential, and this bridge sent none (${none.r.error.message.replace(' (pass --key, or set SWITCHYARD_API_KEY)', '')}): pass --key, or set SWITCHYARD_API_KEY\n`);
    const right = await run('the-right-key');
    expect(right.r.result.protocolVersion).toBe('2025-11-25');
    expect([right.code, right.stderr]).toEqual([0, '']);
  }, 40_000);
});
