/**
 * Acceptance: every outcome kind the ledger knows, produced by a real call through the real
 * hub and found again with `switchyard ledger query --json` (its command run in this process,
 * and the binary checked to print the same), with the facts a row must carry (client era and
 * info, hub name, server, upstream name and era, sizes); then `ledger verify` passes, and fails
 * naming the row once a row is altered behind its back.
 * (`unknown`, the outcome of calls cut off by a crash, is in ledger-crash.test.ts.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { metricValue, scrape } from '../helpers/prometheus.js';
import { fixture, LEGACY, ledgerCli, ledgerInProcess, legacySession, MODERN, modernCall, queryRows, readCounter, SDK1, SDK2, textOf, waitForReady, waitForRows, type Json, type Row } from './ledger-helpers.js';

let hub: HubProcess;
let db: string;
let v1: ClientV1;
let v2: ClientV2;
let httpUpstream: ChildProcess;

/** sdk1 fixture on Streamable HTTP, spawned here so the test can take it down. */
function startHttpUpstream(): Promise<{ proc: ChildProcess; url: string }> {
  const proc = spawn(process.execPath, [join(ROOT, SDK1), '--http', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error('HTTP upstream did not start')), 15_000);
    proc.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /LISTENING (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, url: `http://127.0.0.1:${m[1]}/mcp` });
      }
    });
  });
}

/** The one row with this tool and outcome (fails if there are several: each test uses its own). */
async function onlyRow(filter: Record<string, string>): Promise<Row> {
  const rows = await waitForRows(db, filter);
  expect(rows).toHaveLength(1);
  return rows[0];
}

beforeAll(async () => {
  const up = await startHttpUpstream();
  httpUpstream = up.proc;
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-outcomes-'));
  hub = await startHub(
    {
      servers: {
        f: fixture(SDK1, dir),
        m: fixture(SDK2, dir, {}, join(dir, 'counter-m.json')),
        // `slow` reports progress, which restarts timeoutMs: the hard cap is what cuts it off.
        t: fixture(SDK1, dir, { timeoutMs: 500, maxTotalTimeoutMs: 500 }, join(dir, 'counter-t.json')),
        h: { url: up.url },
      },
    },
    { dir },
  );
  db = join(hub.dir, 'ledger.db');
  await waitForReady(hub.url, ['f', 'm', 't', 'h']);
  v1 = new ClientV1({ name: 'ledger-v1', version: '1.2.3' });
  await v1.connect(new TransportV1(new URL(hub.url)));
  v2 = new ClientV2({ name: 'ledger-v2', version: '4.5.6' }, { versionNegotiation: { mode: 'auto' } });
  await v2.connect(new TransportV2(new URL(hub.url)));
  // Both clients list first, as real clients do: every tool used below was listed.
  expect((await v1.listTools()).tools.map((t) => t.name)).toEqual(expect.arrayContaining(['f__echo', 'h__echo', 't__slow', 'm__echo']));
  await v2.listTools();
}, 40_000);

afterAll(async () => {
  await v1?.close().catch(() => undefined);
  await v2?.close().catch(() => undefined);
  await hub?.stop();
  if (httpUpstream && httpUpstream.exitCode === null) httpUpstream.kill();
});

describe('ledger rows of real calls through the hub', () => {
  it('ok from a legacy SDK v1 client to a legacy upstream, with era, client info, names and sizes', async () => {
    const res = await v1.callTool({ name: 'f__echo', arguments: { text: 'hello ledger' } });
    expect(textOf(res as Json)).toBe('echo:hello ledger');
    const row = await onlyRow({ tool: 'f__echo', outcome: 'ok' });
    expect(row).toMatchObject({
      method: 'tools/call',
      principal: 'anonymous',
      clientEra: LEGACY,
      clientName: 'ledger-v1',
      clientVersion: '1.2.3',
      server: 'f',
      tool: 'f__echo',
      upstreamName: 'echo',
      upstreamEra: LEGACY,
      errorKind: null,
      errorCode: null,
    });
    expect(row.clientAddress).toMatch(/127\.0\.0\.1/);
    expect(row.seq).toBeGreaterThan(0);
    expect(row.latencyMs).toBeGreaterThan(0);
    expect(row.argsHash).toMatch(/^[0-9a-f]{64}$/);
    expect(row.requestBytes).toBeGreaterThan(JSON.stringify({ text: 'hello ledger' }).length);
    // The upstream's result as JSON: at least the content the client got back.
    expect(row.responseBytes).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(res.content)));
    expect(row.responseBytes).toBeLessThan(1000);
    // The session's initialize is recorded too, by the edge, with the same client facts.
    const init = (await queryRows(db)).filter((r) => r.method === 'initialize' && r.clientName === 'ledger-v1');
    expect(init).toHaveLength(1);
    expect(init[0]).toMatchObject({ outcome: 'ok', clientEra: LEGACY, clientVersion: '1.2.3' });
  });

  it('ok from a modern SDK v2 client to a modern upstream; a raw request records its exact size', async () => {
    const res = await v2.callTool({ name: 'm__echo', arguments: { text: 'modern' } });
    expect(textOf(res as Json)).toBe('echo:modern');
    const row = await onlyRow({ tool: 'm__echo', outcome: 'ok' });
    expect(row).toMatchObject({ clientEra: MODERN, clientName: 'ledger-v2', clientVersion: '4.5.6', server: 'm', upstreamName: 'echo', upstreamEra: MODERN });

    const big = 'x'.repeat(5000);
    const raw = await modernCall(hub.url, 'raw-size-1', 'tools/call', { name: 'f__add', arguments: { a: 2, b: 40 } }, { clientName: 'sizer' });
    expect(raw.body?.result?.structuredContent).toEqual({ sum: 42 });
    const echoed = await modernCall(hub.url, 'raw-size-2', 'tools/call', { name: 'f__echo', arguments: { text: big } }, { clientName: 'sizer' });
    expect(textOf(echoed.body?.result)).toBe(`echo:${big}`);
    const add = await onlyRow({ tool: 'f__add' });
    expect(add).toMatchObject({ requestId: 'raw-size-1', clientEra: MODERN, clientName: 'sizer', clientVersion: '3.1.4', upstreamEra: LEGACY });
    expect(add.requestBytes).toBe(raw.requestBytes);
    const sized = (await queryRows(db, { tool: 'f__echo' })).find((r) => r.requestId === 'raw-size-2')!;
    expect(sized.requestBytes).toBe(echoed.requestBytes);
    expect(sized.responseBytes).toBeGreaterThan(5000);
    expect(sized.responseBytes).toBeLessThan(5200);
  });

  it('tool_error: the upstream ran the tool and reported a failure', async () => {
    const res = await v1.callTool({ name: 'f__fail', arguments: {} });
    expect(res.isError).toBe(true);
    const row = await onlyRow({ tool: 'f__fail' });
    expect(row).toMatchObject({ outcome: 'tool_error', errorKind: 'tool', server: 'f', upstreamName: 'fail' });
  });

  it('the number id 7310 and the string id "7310" are different requests: --request-id selects one, the output says which, the other is told of', async () => {
    for (const id of [7310, '7310', 'r-7310']) expect((await modernCall(hub.url, id, 'tools/call', { name: 'f__add', arguments: { a: 1, b: 2 } })).body?.result?.structuredContent).toEqual({ sum: 3 });
    await waitForRows(db, { method: 'tools/call', tool: 'f__add' }, (rows) => rows.filter((r) => String(r.requestId).endsWith('7310')).length === 3);
    const pick = async (value: string) => {
      const r = await ledgerCli(db, ['query', '--json', ...(value.startsWith('=') ? [`--request-id${value}`] : ['--request-id', value])]);
      expect(r.code, r.stderr).toBe(0);
      return { rows: r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Row), err: r.stderr };
    };
    const num = await pick('7310');
    expect(num.rows.map((r) => [r.requestId, r.requestIdType])).toEqual([[7310, 'number']]);
    expect(num.err).toContain(`note: request id the number 7310 only; the string "7310", a different request id, has rows too: --request-id '"7310"' lists them`);
    const str = await pick('"7310"');
    expect(str.rows.map((r) => [r.requestId, r.requestIdType])).toEqual([['7310', 'string']]);
    expect(str.err).toContain('--request-id 7310 lists them');
    // Written after `=`, the quotes are the id's too (yargs strips them there: the number's rows, listed as the string's).
    expect((await pick('="7310"')).rows.map((r) => [r.requestId, r.requestIdType])).toEqual([['7310', 'string']]);
    // A string id that reads as no number is found by its text, as it always was.
    expect((await pick('r-7310')).rows.map((r) => [r.requestId, r.requestIdType])).toEqual([['r-7310', 'string']]);
  });

  it('the string id "" is an id; an id longer than a row keeps is kept cut, still a string, and found by --request-id; a lone surrogate is kept; a negative number id is a number in CSV', async () => {
    const digits = '9'.repeat(5000); // a string of a number's text: kept in its JSON form, cut without its closing quote before
    const escaped = 'k"\u0001'.repeat(2000); // its JSON form is three times as long
    const add = (id: string | number) => modernCall(hub.url, id, 'tools/call', { name: 'f__add', arguments: { a: 2, b: 5 } }, { clientName: 'ids-probe' });
    for (const id of ['', digits, escaped, -7312, 'lone\ud800']) expect((await add(id)).body?.result?.structuredContent, String(id).slice(0, 9)).toEqual({ sum: 7 });
    // An id no request can have: refused, and its row has no id (not the string "").
    const refused = await add(1.5);
    expect(refused.body?.error?.code).toBe(-32600);
    const all = await waitForRows(db, { client: 'ids-probe' }, (rows) => rows.length === 5);
    const noId = (await waitForRows(db, { method: '(invalid)' }, (rows) => rows.some((r) => r.requestBytes === refused.requestBytes))).filter((r) => r.requestBytes === refused.requestBytes);
    all.push(...noId);
    expect(all.map((r) => [String(r.requestId).slice(0, 12), r.requestIdType, r.requestIdCut, r.outcome])).toEqual([
      ['', 'string', false, 'ok'],
      ['999999999999', 'string', true, 'ok'],
      ['k"\u0001k"\u0001k"\u0001k"\u0001', 'string', true, 'ok'],
      ['-7312', 'number', false, 'ok'],
      ['lone\ud800', 'string', false, 'ok'], // stored as U+FFFD before: another id's text
      ['', null, false, 'rpc_error'], // the message with id 1.5
    ]);
    // Cut visibly: the start of the id, as long as the row's column (4096) holds in its JSON form.
    expect(all[1]!.requestId).toBe('9'.repeat(4093));
    const cut = String(all[2]!.requestId);
    expect(escaped.startsWith(cut) && JSON.stringify(cut).length + 1 <= 4096 && cut.length > 1300).toBe(true);
    const pick = async (...args: string[]) => {
      const r = await ledgerInProcess(db, ['query', '--json', '--client', 'ids-probe', ...args]);
      return { code: r.code, err: r.stderr, ids: r.stdout.split('\n').filter(Boolean).map((l) => String((JSON.parse(l) as Row).requestId).slice(0, 12)) };
    };
    // `--request-id ''` and `'""'` are the string "", not the rows with no id.
    expect(await pick('--request-id', '')).toEqual({ code: 0, err: '', ids: [''] });
    expect((await pick('--request-id', '""')).ids).toEqual(['']);
    // The whole id finds its row, with a note that only its start is compared.
    const long = await pick('--request-id', JSON.stringify(digits));
    expect(long.ids).toEqual(['999999999999']);
    expect(long.err).toContain('note: request id the string "9999999999999999999999999999999999999999"… (5000 characters) is longer than a ledger row keeps: rows hold its first 4093 characters');
    expect((await pick('--request-id', escaped)).ids).toEqual(['k"\u0001k"\u0001k"\u0001k"\u0001']);
    // Unquoted, those digits are a number no id can be (read as a double it was another one): said, exit 2.
    const number = await pick('--request-id', digits);
    expect(number.code).toBe(2);
    expect(number.err).toContain("is no number a request id can be (an integer of at most 2^53 - 1 in size");
    expect((await pick('--request-id', '-7312')).ids).toEqual(['-7312']);
    expect((await pick('--request-id', '"lone\\ud800"')).ids).toEqual(['lone\ud800']);
    expect((await pick('--request-id', 'lone\ufffd')).ids).toEqual([]);
    // CSV: the number -7312 as a number; text starting with a minus is kept from spreadsheets' formulas, a number needs no such guard.
    const csv = (await ledgerInProcess(db, ['export', '--format', 'csv', '--client', 'ids-probe', '--request-id', '-7312'])).stdout.split('\n');
    expect(csv[0]).toMatch(/^id,seq,ts,requestId,requestIdType,requestIdCut,/);
    expect(csv[1]).toMatch(/^\d+,\d+,[^,]+,-7312,number,false,/);
  });

  it('rpc_error with its code: an unknown tool is -32602', async () => {
    await expect(v1.callTool({ name: 'nope__missing', arguments: {} })).rejects.toMatchObject({ code: -32602 });
    const row = await onlyRow({ tool: 'nope__missing' });
    expect(row).toMatchObject({ outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: -32602, server: null, clientName: 'ledger-v1' });
    expect(row.errorMessage).toContain('nope__missing');
  });

  it('timeout: the server timeoutMs (500 ms) cuts off a slow call', async () => {
    const t0 = Date.now();
    // 10 s of work, so a bound of 6 s tells the cut from the finish even on a loaded machine
    // (the whole test took 1.7 s under the full suite).
    const res = await v1.callTool({ name: 't__slow', arguments: { ms: 10_000 } });
    expect(Date.now() - t0).toBeLessThan(6000);
    expect(res.isError).toBe(true);
    const row = await onlyRow({ tool: 't__slow' });
    expect(row).toMatchObject({ outcome: 'timeout', errorKind: 'transport', server: 't', upstreamName: 'slow' });
    expect(row.latencyMs).toBeGreaterThanOrEqual(450);
    expect(row.latencyMs).toBeLessThan(6000);
  });

  it('cancelled: a legacy client aborts its call (notifications/cancelled)', async () => {
    const ac = new AbortController();
    const call = v1.callTool({ name: 'f__slow', arguments: { ms: 25_000 } }, undefined, { signal: ac.signal });
    // Abort once the call is in flight at the upstream (its row is committed before forwarding).
    await waitForRows(db, { tool: 'f__slow' });
    ac.abort('user gave up');
    await expect(call).rejects.toBeDefined();
    const row = (await waitForRows(db, { tool: 'f__slow', outcome: 'cancelled' }))[0];
    // The client's reason, as the upstream was told it too (not the hub's "request cancelled").
    expect(row).toMatchObject({ outcome: 'cancelled', server: 'f', clientEra: LEGACY, errorMessage: 'user gave up' });
    // Well under the tool's 25 s. The abort waits for the in-flight row to show in SQLite, which
    // took over 8 s once under the full suite's load: the margin is for that, not for the hub.
    expect(row.latencyMs).toBeLessThan(20_000);
  });

  it("cancelled: a legacy client's cancellation read before the request it names (its own POST) still holds: the call is not carried out", async () => {
    const s = await legacySession(hub.url, 'cancels-ahead');
    const counter = join(hub.dir, 'counter-m.json');
    // Over HTTP each message is its own POST: the cancellation may be read first.
    expect((await s.notify('notifications/cancelled', { requestId: 'ahead-1', reason: 'changed my mind' })).status).toBe(202);
    const cancelled = await s.call('ahead-1', 'tools/call', { name: 'm__counter_bump', arguments: { label: 'ahead' } });
    // Answered as a request cancelled while it ran is: nothing (MCP).
    expect(cancelled.status).toBe(202);
    expect(cancelled.body).toBeUndefined();
    const row = await onlyRow({ tool: 'm__counter_bump', 'request-id': 'ahead-1' });
    expect(row).toMatchObject({ requestId: 'ahead-1', outcome: 'cancelled', errorMessage: 'changed my mind', clientEra: LEGACY });
    // Another request of the session is not touched by it, and runs.
    const next = await s.call('ahead-2', 'tools/call', { name: 'm__counter_bump', arguments: { label: 'after' } });
    expect(next.body?.result?.isError).toBeFalsy();
    expect(readCounter(counter)).toMatchObject({ after: 1 });
    expect(readCounter(counter).ahead).toBeUndefined();
  });

  it('cancelled: a modern client goes away mid-call (its POST connection closes)', async () => {
    const ac = new AbortController();
    const call = modernCall(hub.url, 'gone-1', 'tools/call', { name: 'f__slow', arguments: { ms: 25_000 } }, { clientName: 'leaver', signal: ac.signal });
    // Leave once the call is in flight at the upstream (its row is committed before forwarding).
    await waitForRows(db, { tool: 'f__slow' }, (rows) => rows.some((r) => r.requestId === 'gone-1'));
    ac.abort();
    await expect(call).rejects.toBeDefined();
    // A closed connection is a modern client's cancellation: the call is cut short, not run to its end.
    const rows = await waitForRows(db, { tool: 'f__slow', outcome: 'cancelled' }, (r) => r.some((x) => x.requestId === 'gone-1'));
    const row = rows.find((r) => r.requestId === 'gone-1')!;
    expect(row).toMatchObject({ outcome: 'cancelled', server: 'f', clientEra: MODERN, clientName: 'leaver' });
    // Well under the tool's 25 s. The abort waits for the in-flight row to show in SQLite, which
    // took over 8 s once under the full suite's load: the margin is for that, not for the hub.
    expect(row.latencyMs).toBeLessThan(20_000);
  });

  it('replayed and denied: a repeated idempotency key replays; other arguments are refused', async () => {
    const s = await legacySession(hub.url);
    const key = { 'idempotency-key': 'outcomes-k1' };
    const first = await s.call(1, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'outcomes' } }, key);
    const again = await s.call(2, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'outcomes' } }, key);
    expect(again.body?.result).toEqual(first.body?.result);
    const other = await s.call(3, 'tools/call', { name: 'f__counter_bump', arguments: { label: 'other' } }, key);
    expect(other.body?.result?.isError).toBe(true);
    expect(textOf(other.body?.result)).toContain('outcomes-k1');

    const rows = await queryRows(db, { tool: 'f__counter_bump' });
    expect(rows.map((r) => [r.requestId, r.outcome])).toEqual([
      [1, 'ok'],
      [2, 'replayed'],
      [3, 'denied'],
    ]);
    for (const r of rows) expect(r.idempotencyKey).toBe('outcomes-k1');
    expect(rows[1].responseBytes).toBe(rows[0].responseBytes);
    expect(rows[2]).toMatchObject({ errorKind: 'policy', clientName: 'ledger-raw-legacy' });
    expect(rows[2].errorMessage).toContain('other arguments');
  });

  it('a replayed error is still an error: its row says which, /metrics and `ledger stats` count it as one', async () => {
    const s = await legacySession(hub.url);
    const key = { 'idempotency-key': 'outcomes-fail' };
    const first = await s.call(1, 'tools/call', { name: 'f__fail', arguments: {} }, key);
    const again = await s.call(2, 'tools/call', { name: 'f__fail', arguments: {} }, key);
    expect(again.body?.result).toEqual(first.body?.result);
    expect(again.body?.result?.isError).toBe(true);
    const rows = (await queryRows(db, { tool: 'f__fail' })).filter((r) => r.idempotencyKey === 'outcomes-fail');
    expect(rows.map((r) => [r.outcome, r.errorKind])).toEqual([
      ['tool_error', 'tool'],
      ['replayed', 'tool'],
    ]);
    const metrics = await scrape(hub.url);
    expect(metricValue(metrics, 'switchyard_call_errors_total', { tool: 'f__fail', outcome: 'replayed_error' })).toBe(1);
    expect(metricValue(metrics, 'switchyard_call_errors_total', { tool: 'f__fail' })).toBe(metricValue(metrics, 'switchyard_calls_total', { tool: 'f__fail' }));
    const stats = await ledgerCli(db, ['stats', '--json', '--tool', 'f__fail']);
    const line = JSON.parse(stats.stdout.trim().split('\n')[0]!) as { calls: number; errors: number };
    expect(line.errors).toBe(line.calls);
  });

  it('prompts, resources and completions: rows name what the client asked for, found or not', async () => {
    const call = (id: string, method: string, params: Json) => modernCall(hub.url, id, method, params, { clientName: 'names' });
    expect((await call('pg', 'prompts/get', { name: 'f__greet', arguments: { name: 'bob' } })).body?.result).toBeDefined();
    expect((await call('rr', 'resources/read', { uri: 'sdk1://static/hello' })).body?.result).toBeDefined();
    expect((await call('cc', 'completion/complete', { ref: { type: 'ref/prompt', name: 'f__greet' }, argument: { name: 'name', value: 'al' } })).body?.result).toBeDefined();
    expect((await call('pg-x', 'prompts/get', { name: 'nope__prompt', arguments: {} })).body?.error?.code).toBe(-32602);
    expect((await call('rr-x', 'resources/read', { uri: 'nope://nothing' })).body?.error).toBeDefined();
    expect((await call('cc-x', 'completion/complete', { ref: { type: 'ref/prompt', name: 'nope__greet' }, argument: { name: 'n', value: '' } })).body?.error).toBeDefined();

    const rows = (await queryRows(db)).filter((r) => r.clientName === 'names');
    const seen = Object.fromEntries(rows.map((r) => [r.requestId, [r.method, r.tool, r.server, r.upstreamName, r.outcome]]));
    expect(seen).toEqual({
      pg: ['prompts/get', 'f__greet', 'f', 'greet', 'ok'],
      rr: ['resources/read', 'sdk1://static/hello', 'f', 'sdk1://static/hello', 'ok'],
      cc: ['completion/complete', 'f__greet', 'f', 'greet', 'ok'],
      'pg-x': ['prompts/get', 'nope__prompt', null, null, 'rpc_error'],
      'rr-x': ['resources/read', 'nope://nothing', null, null, 'rpc_error'],
      'cc-x': ['completion/complete', 'nope__greet', null, null, 'rpc_error'],
    });
    for (const r of rows.filter((x) => x.outcome === 'ok')) expect(r.responseBytes).toBeGreaterThan(20);
    // The row keeps the code this client saw: resource-not-found is -32602 in the modern era.
    expect((await call('rr-y', 'resources/read', { uri: 'nope://other' })).body?.error?.code).toBe(-32602);
    expect(await onlyRow({ tool: 'nope://other' })).toMatchObject({ requestId: 'rr-y', errorCode: -32602 });
  });

  it('a legacy client reading an unknown resource sees -32002, and so does its row', async () => {
    await expect(v1.readResource({ uri: 'nope://legacy' })).rejects.toMatchObject({ code: -32002 });
    expect(await onlyRow({ tool: 'nope://legacy' })).toMatchObject({ method: 'resources/read', outcome: 'rpc_error', errorCode: -32002, clientName: 'ledger-v1' });
  });

  it('refused before a session or a method: each such request has its rpc_error row', async () => {
    const raw = async (body: string, headers: Record<string, string> = {}) =>
      (await fetch(hub.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body })).status;
    const call = (id: string, params: unknown = { name: 'f__echo', arguments: { text: 'x' } }) => JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params });
    const broken = '{"jsonrpc": "2.0", "id": "broken-json", ';
    expect(await raw(broken)).toBe(400);
    expect(await raw(`[${call('in-a-batch')}]`)).toBe(400);
    expect(await raw(call('bad-params', 'not an object'))).toBe(400);
    expect(await raw(call('no-session'))).toBe(400);
    expect(await raw(call('unknown-session'), { 'mcp-session-id': 'no-such-session' })).toBe(404);
    const nullId = JSON.stringify({ jsonrpc: '2.0', id: null, method: 'tools/call', params: {} });
    expect(await raw(nullId)).toBe(400);
    await waitForRows(db, { outcome: 'rpc_error' }, (rows) => rows.some((r) => r.requestId === 'unknown-session'));
    const sql = new Database(db, { readonly: true });
    try {
      const row = (where: string, ...args: unknown[]) =>
        sql.prepare(`SELECT request_id AS requestId, method, outcome, error_code AS code, client_era AS era, request_bytes AS bytes FROM audit WHERE ${where}`).all(...args);
      expect(row(`method = '(invalid)' AND error_code = -32700`)).toEqual([expect.objectContaining({ requestId: '', outcome: 'rpc_error', era: LEGACY, bytes: Buffer.byteLength(broken) })]);
      // Its method read, though its params are no object: the row is found by it.
      expect(row(`request_id = 'bad-params'`)).toEqual([expect.objectContaining({ method: 'tools/call', code: -32600 })]);
      // A batch refused whole: its request's row under its own id and method.
      expect(row(`request_id = 'in-a-batch'`)).toEqual([expect.objectContaining({ method: 'tools/call', outcome: 'rpc_error', code: -32600 })]);
      // (By its size: the id 1.5 of another case here is refused with the same words.)
      expect(row(`method = '(invalid)' AND error_message LIKE '%never null%' AND request_bytes = ?`, Buffer.byteLength(nullId))).toEqual([expect.objectContaining({ requestId: '' })]);
      expect(row(`request_id = 'no-session'`)).toEqual([expect.objectContaining({ method: 'tools/call', outcome: 'rpc_error', code: -32600, era: LEGACY })]);
      expect(row(`request_id = 'unknown-session'`)).toEqual([expect.objectContaining({ method: 'tools/call', code: -32001 })]);
    } finally {
      sql.close();
    }
  });

  it('arguments nested too deeply for a canonical digest: -32602 and a row, not an internal error', async () => {
    // Written out by hand: this process's own JSON.stringify would not get through 20,000 levels.
    const deep = '['.repeat(20_000) + ']'.repeat(20_000);
    const meta = JSON.stringify({ 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} });
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'f__echo' },
      body: `{"jsonrpc":"2.0","id":"too-deep","method":"tools/call","params":{"name":"f__echo","arguments":{"text":"a","x":${deep}},"_meta":${meta}}}`,
    });
    const r = (await res.json()) as { error?: { code: number; message: string } };
    expect(r.error).toMatchObject({ code: -32602, message: expect.stringMatching(/nested more than 1000 levels/) });
    // By its id: the rows of calls refused earlier at the edge name f__echo too.
    const row = await onlyRow({ 'request-id': 'too-deep' });
    expect(row).toMatchObject({ tool: 'f__echo', outcome: 'rpc_error', errorCode: -32602 });
    // A hub that is fine afterwards.
    expect(textOf((await modernCall(hub.url, 'after-deep', 'tools/call', { name: 'f__echo', arguments: { text: 'ok' } })).body?.result)).toBe('echo:ok');
  });

  it('unavailable: the upstream went down after its tools were listed', async () => {
    expect((await v1.callTool({ name: 'h__echo', arguments: { text: 'up' } })).isError).toBeFalsy();
    await new Promise<void>((resolve) => {
      httpUpstream.once('exit', () => resolve());
      httpUpstream.kill('SIGKILL');
    });
    const res = await v1.callTool({ name: 'h__echo', arguments: { text: 'down' } });
    expect(res.isError).toBe(true);
    const row = await onlyRow({ tool: 'h__echo', outcome: 'unavailable' });
    expect(row).toMatchObject({ errorKind: 'transport', server: 'h', upstreamName: 'echo', upstreamEra: LEGACY });
    expect(row.errorMessage).toBeTruthy();
  });
});

describe('ledger verify on the hub-written file', () => {
  it('passes, then fails naming the row altered with SQL', async () => {
    const ok = await ledgerCli(db, ['verify']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/^ok: \d+ rows verified/);
    const rows = Number(/^ok: (\d+)/.exec(ok.stdout)![1]);
    expect(rows).toBeGreaterThan(15);

    await hub.stop();
    // The rows the tests above waited for were read by the ledger command in this process
    // (ledger-helpers.ts): the binary prints the same.
    const all = await queryRows(db);
    expect(all.length).toBeGreaterThan(15);
    const bin = await ledgerCli(db, ['query', '--json', '--limit', '1000']);
    expect(bin.code, bin.stderr).toBe(0);
    expect(bin.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Row)).toEqual(all);
    const target = (await queryRows(db, { tool: 'f__fail' }))[0];
    const raw = new Database(db);
    raw.prepare(`UPDATE audit SET outcome = 'ok', error_kind = NULL WHERE id = ?`).run(target.id);
    raw.close();
    const bad = await ledgerCli(db, ['verify']);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain(`FAILED at row ${target.id} `);
  });
});
