import { spawn } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ledgerFinding } from '../../src/cli/doctor.js';
import { resolveLedgerPath } from '../../src/cli/ledger/ledger-file.js';
import { processStart } from '../../src/process-alive.js';
import type { HubConfig } from '../../src/config/types.js';
import { ChainWriter, rowDigest } from '../../src/ledger/chain.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { LedgerReader, type KeyRow } from '../../src/ledger/reader.js';
import { DEFAULT_KEY_TTL_MS } from '../../src/ledger/db.js';
import { loadMigrations, migrate, schemaVersion } from '../../src/ledger/migrate.js';
import { parseWhen } from '../../src/ledger/when.js';
import { whereClause, type AuditDbRow } from '../../src/ledger/rows.js';
import { KEY_HEADER, keyCells, ROW_HEADER, rowCells, rowJson, table } from '../../src/ledger/format.js';
import { requestIdText } from '../../src/ledger/request-id.js';
import { closeAndRemove, begin, end, line, tempDir, until } from './ledger-helpers.js';
import { runLedgerCommand } from '../helpers/ledger-command.js';

const NOW = 1_800_000_000_000;
let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

interface Run {
  out: string;
  err: string;
  code: number;
}

/**
 * Runs `ledger …` through yargs in this process, capturing what it prints, at the tests' clock.
 * `onOut` sees all the output so far; a promise it returns is the output not taking more until it settles.
 */
async function cli(args: string[], opts: { signal?: AbortSignal; onOut?: (s: string) => void | Promise<void> } = {}): Promise<Run> {
  const { out, err, code } = await runLedgerCommand(args, { now: () => NOW, signal: opts.signal, pollMs: 20, onOut: opts.onOut });
  return { out, err, code };
}

/** A new ledger (in `t`) of `n` tools/list rows in flight, r0 oldest, put in by hand; the connection that put them in. */
function inFlightRows(n: number): Database.Database {
  t = tempDir();
  Ledger.open({ path: t.db }).close();
  const raw = new Database(t.db);
  const ins = raw.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, outcome) VALUES (?, ?, 'alice', '2026-07-28', 'tools/list', 'in_flight')`);
  raw.transaction(() => {
    for (let i = 0; i < n; i++) ins.run(NOW - n + i, `r${i}`);
  })();
  return raw;
}

/**
 * Runs `args` (a command that prints 1,200 rows), and as its first write comes changes the
 * newest row (r1199) to tools/call in `raw`: a row read after the output began shows so. The
 * command ends well and wrote less than all its rows the first time.
 */
async function writesAsItReads(raw: Database.Database, args: string[]): Promise<Run> {
  let first = '';
  const r = await cli(args, {
    onOut: (all) => {
      if (first) return;
      first = all;
      raw.prepare(`UPDATE audit SET method = 'tools/call' WHERE request_id = 'r1199'`).run();
    },
  });
  expect(r.code, r.err).toBe(0);
  expect(first.trimEnd().split('\n').length, 'the first write').toBeLessThan(1200);
  return r;
}

/** 2 servers × 3 rows over the last 3 hours, plus one in flight. */
async function seeded(): Promise<Ledger> {
  t = tempDir();
  ledger = Ledger.open({ path: t.db, storeBodies: true });
  const rows: [number, string, string, 'ok' | 'rpc_error' | 'timeout', number][] = [
    [3, 'fs', 'fs__read', 'ok', 10],
    [2.5, 'mem', 'mem__store', 'ok', 20],
    [2, 'fs', 'fs__write', 'rpc_error', 30],
    [1.5, 'mem', 'mem__store', 'timeout', 40],
    [0.5, 'fs', 'fs__read', 'ok', 50],
    [0.25, 'mem', 'mem__load', 'ok', 60],
  ];
  for (const [hoursAgo, server, hubName, outcome, latencyMs] of rows) {
    await ledger.record(
      begin({ ts: NOW - hoursAgo * 3_600_000, server, hubName, idempotencyKey: `key-${latencyMs}`, argsHash: 'ab'.repeat(32), args: { q: 'say "hi", ok' } }),
      end({ outcome, latencyMs, errorCode: outcome === 'rpc_error' ? -32602 : null }),
    );
  }
  ledger.begin(begin({ ts: NOW - 60_000, server: 'fs', hubName: 'fs__slow' }));
  await ledger.whenCommitted();
  ledger.sync(); // into SQLite now, where the CLI reads
  return ledger;
}

describe('switchyard ledger CLI', () => {
  it('query prints a table, oldest first, and filters', async () => {
    await seeded();
    const all = await cli(['ledger', 'query', '--db', t.db]);
    expect(all.code).toBe(0);
    const lines = all.out.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^time\s+principal\s+group\s+method\s+server\s+tool\s+eras\s+outcome\s+code\s+ms\s+idem-key\s+trace$/);
    expect(lines).toHaveLength(8);
    expect(lines[1]).toContain('fs__read');
    expect(lines[7]).toContain('in_flight');
    expect(lines[3]).toMatch(/fs__write .*rpc_error\s+-32602\s+30\s+key-30/);
    const recentFs = await cli(['ledger', 'query', '--db', t.db, '--server', 'fs', '--since', '1h']);
    expect(recentFs.out.trimEnd().split('\n')).toHaveLength(3);
    // A duration written with a minus, as a separate word: yargs read `-1h` as the flags -1 and -h ("Unknown arguments").
    expect(await cli(['ledger', 'query', '--db', t.db, '--server', 'fs', '--since', '-1h'])).toEqual(recentFs);
    expect(await cli(['ledger', 'query', '--db', t.db, '--server', 'fs', '--since=-1h', '--until', '-0s'])).toEqual(recentFs);
    const mem = await cli(['ledger', 'query', '--db', t.db, '--tool', 'mem__store', '--outcome', 'timeout', '--until', new Date(NOW).toISOString()]);
    expect(mem.out.trimEnd().split('\n')).toHaveLength(2);
    const limited = await cli(['ledger', 'query', '--db', t.db, '--limit', '2']);
    expect(limited.out.trimEnd().split('\n')).toHaveLength(3);
    // Cut at the limit: said on stderr, as a table of every match would read the same.
    expect(limited.err).toBe('switchyard ledger query: note: the newest 2 matching rows; more may match (--limit N shows more)\n');
    expect(mem.err).toBe('');
    expect((await cli(['ledger', 'query', '--db', t.db, '--limit', '2', '--json'])).err).toBe('');
  });

  it('a table with no rows says so on stderr; JSON lines and tail -n 0 do not', async () => {
    await seeded();
    const none = ['--db', t.db, '--server', 'nosuch'];
    for (const cmd of [['query'], ['tail'], ['stats']]) {
      const r = await cli(['ledger', ...cmd, ...none]);
      expect(r.code, cmd[0]).toBe(0);
      expect(r.out.trimEnd().split('\n'), cmd[0]).toHaveLength(1); // the header
      expect(r.err, cmd[0]).toMatch(new RegExp(`^switchyard ledger ${cmd[0]}: note: no (rows|finished calls) match\n$`));
      expect(await cli(['ledger', ...cmd, ...none, '--json']), cmd[0]).toEqual({ out: '', err: '', code: 0 });
    }
    // Finished calls only: the one in flight is not one.
    expect((await cli(['ledger', 'stats', '--db', t.db, '--tool', 'fs__slow'])).err).toMatch(/no finished calls match/);
    expect((await cli(['ledger', 'tail', '-n', '0', '--db', t.db])).err).toBe('');
    expect((await cli(['ledger', 'query', '--db', t.db])).err).toBe('');
  });

  it('invisible characters in a name are shown, not hidden: `?` in the table and CSV, escaped in JSON', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    // What a client can make a row say: a tool that reads as fs__read, a method as tools/call.
    const tool = 'fs__read\u200b';
    const method = 'tools/call\u2028\u{e0041}\u00ad\ufeff';
    await ledger.record(begin({ hubName: tool, method, server: undefined }), end({ outcome: 'rpc_error', errorMessage: 'no\u2060 such tool\u2029' }));
    ledger.sync();
    const raw = /[\u200b\u2028\u2029\u2060\u00ad\ufeff\u{e0041}]/u;
    const table = (await cli(['ledger', 'query', '--db', t.db])).out;
    expect(table).not.toMatch(raw);
    expect(table).toContain(' fs__read? ');
    expect(table).toContain(' tools/call???? ');
    const csv = (await cli(['ledger', 'export', '--format', 'csv', '--db', t.db])).out;
    expect(csv).not.toMatch(raw);
    expect(csv).toContain(',no? such tool?,');
    const json = (await cli(['ledger', 'query', '--json', '--db', t.db])).out;
    expect(json).not.toMatch(raw);
    expect(json).toContain('"tool":"fs__read\\u200b"');
    expect(JSON.parse(json)).toMatchObject({ tool, method, errorMessage: 'no\u2060 such tool\u2029' });
  });

  // The number 7 was written as "7" beside requestIdType: a JSON reader matching the id its
  // client sent (`select(.requestId == 7)`) found no row. Now the id as sent, as /admin/ledger gives it.
  it('--json and export give a number id as a number, a string id as a string; digits no number keeps exactly stay text', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    for (const [ts, id] of [[1, 7], [2, '7'], [3, -2], [4, 'x']] as const) await ledger.record(begin({ ts: NOW - 10_000 + ts, requestId: requestIdText(id) }), end());
    // A string id of digits past 2^53 that an older hub kept bare (read as a number then).
    await ledger.record(begin({ ts: NOW - 5_000, requestId: '12345678901234567890' }), end());
    await ledger.record(begin({ ts: NOW - 4_000, requestId: 'catalog', principal: 'hub' }), end());
    await ledger.whenCommitted();
    ledger.sync();
    const ids = (out: string) => out.trimEnd().split('\n').map((l) => JSON.parse(l) as { requestId: unknown; requestIdType: unknown }).map((r) => [r.requestId, r.requestIdType]);
    const want = [[7, 'number'], ['7', 'string'], [-2, 'number'], ['x', 'string'], ['12345678901234567890', 'number'], ['catalog', null]];
    expect(ids((await cli(['ledger', 'query', '--json', '--db', t.db])).out)).toEqual(want);
    expect(ids((await cli(['ledger', 'export', '--db', t.db])).out)).toEqual(want);
    const csv = (await cli(['ledger', 'export', '--format', 'csv', '--db', t.db])).out.trimEnd().split('\n').slice(1).map((l) => l.split(',').slice(3, 5));
    expect(csv).toEqual([['7', 'number'], ['7', 'string'], ['-2', 'number'], ['x', 'string'], ['12345678901234567890', 'number'], ['catalog', '']]);
  });

  it('query filters by method, request id and client name too', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const rows: [string, string, string][] = [
      ['tools/list', 'r-1', 'cursor'],
      ['tools/call', 'r-2', 'cursor'],
      ['tools/call', 'r-3', 'vscode'],
      ['resources/read', 'r-1', 'vscode'],
    ];
    for (const [method, requestId, client] of rows)
      await ledger.record(begin({ ts: NOW - 60_000, method, requestId, clientInfo: { name: client, version: '1' } }), end());
    await ledger.whenCommitted();
    ledger.sync();
    const pick = async (...args: string[]) => {
      const r = await cli(['ledger', 'query', '--db', t.db, '--json', ...args]);
      expect(r.code, r.err).toBe(0);
      return r.out.trimEnd().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { method: string; requestId: string; clientName?: string; client?: { name: string } });
    };
    expect((await pick('--method', 'tools/call')).map((r) => r.requestId)).toEqual(['r-2', 'r-3']);
    expect((await pick('--request-id', 'r-1')).map((r) => r.method)).toEqual(['tools/list', 'resources/read']);
    expect((await pick('--client', 'vscode', '--method', 'resources/read')).map((r) => r.requestId)).toEqual(['r-1']);
    expect(await pick('--client', 'nobody')).toEqual([]);
    // The string id "" is an id (kept as `""`): `--request-id ''` lists its rows, not those with no id; a value left out is no "".
    await ledger.record(begin({ ts: NOW - 30_000, method: 'tools/call', requestId: requestIdText('') }), end());
    await ledger.record(begin({ ts: NOW - 20_000, method: 'ping', requestId: requestIdText(undefined) }), end());
    ledger.sync();
    expect((await pick('--request-id', '')).map((r) => [r.method, r.requestId, (r as { requestIdType?: unknown }).requestIdType])).toEqual([['tools/call', '', 'string']]);
    await expect(cli(['ledger', 'query', '--db', t.db, '--request-id', '--json'])).rejects.toThrow(/Not enough arguments following: request-id/);
    // The same filters reach export and stats.
    const exported = await cli(['ledger', 'export', '--db', t.db, '--client', 'cursor']);
    expect(exported.out.trimEnd().split('\n')).toHaveLength(2);
    const stats = await cli(['ledger', 'stats', '--db', t.db, '--json', '--method', 'tools/list']);
    expect(stats.out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { method: string }).method)).toEqual(['tools/list']);
  });

  it('query --json prints one object per line with the documented fields', async () => {
    await seeded();
    const r = await cli(['ledger', 'query', '--db', t.db, '--json', '--server', 'fs', '--outcome', 'rpc_error']);
    const objs = r.out.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(objs).toHaveLength(1);
    expect(objs[0]).toMatchObject({
      ts: new Date(NOW - 2 * 3_600_000).toISOString(),
      principal: 'alice',
      method: 'tools/call',
      server: 'fs',
      tool: 'fs__write',
      upstreamName: 'read',
      clientEra: '2026-07-28',
      upstreamEra: '2025-11-25',
      outcome: 'rpc_error',
      errorCode: -32602,
      latencyMs: 30,
      idempotencyKey: 'key-30',
      argsHash: 'ab'.repeat(32),
      args: { q: 'say "hi", ok' },
    });
  });

  it('--group keeps the requests that came through that tool group; the table, --json and CSV show the group', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const rows: [string, string | undefined][] = [
      ['via-small', 'small'],
      ['via-all', undefined],
      ['via-other', 'other'],
      ['via-small-2', 'small'],
    ];
    for (const [requestId, group] of rows) await ledger.record(begin({ ts: NOW - 60_000, requestId, group }), end());
    ledger.sync();
    const json = await cli(['ledger', 'query', '--db', t.db, '--json', '--group', 'small']);
    expect(json.code, json.err).toBe(0);
    expect(json.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { requestId: string; group: string | null })).toEqual([
      expect.objectContaining({ requestId: 'via-small', group: 'small' }),
      expect.objectContaining({ requestId: 'via-small-2', group: 'small' }),
    ]);
    const all = await cli(['ledger', 'query', '--db', t.db, '--json']);
    expect(all.out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { group: string | null }).group)).toEqual(['small', null, 'other', 'small']);
    const table = (await cli(['ledger', 'query', '--db', t.db])).out.trimEnd().split('\n');
    expect(table[0]).toMatch(/^time\s+principal\s+group\s+method/);
    expect(table.slice(1).map((l) => l.split(/\s+/)[2])).toEqual(['small', '-', 'other', 'small']);
    // The same filter reaches tail, stats and export; CSV has the column.
    expect((await cli(['ledger', 'tail', '--db', t.db, '--json', '--group', 'other'])).out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { requestId: string }).requestId)).toEqual(['via-other']);
    expect(JSON.parse((await cli(['ledger', 'stats', '--db', t.db, '--json', '--group', 'small'])).out)).toMatchObject({ calls: 2 });
    const csv = (await cli(['ledger', 'export', '--db', t.db, '--format', 'csv', '--group', 'other'])).out.trimEnd().split('\n');
    const header = csv[0].split(',');
    expect(csv).toHaveLength(2);
    expect(csv[1].split(',')[header.indexOf('group')]).toBe('other');
    expect((await cli(['ledger', 'query', '--db', t.db, '--group', 'nope', '--json'])).out).toBe('');
    const twice = await cli(['ledger', 'query', '--db', t.db, '--group', 'a', '--group', 'b']);
    expect([twice.code, twice.err]).toEqual([2, 'switchyard ledger query: --group must be given once\n']);
  });

  it('--trace-id keeps the rows of one W3C trace; --json, CSV and the table show its ids; the chain covers them', async () => {
    t = tempDir();
    // A ledger as a hub before migration 0015 left it, a row chained there (no trace columns).
    const raw = new Database(t.db);
    raw.pragma('journal_mode = WAL');
    const all = loadMigrations();
    migrate(raw, all.slice(0, all.findIndex((m) => m.name === 'audit_trace')));
    const chain = new ChainWriter(raw);
    raw.transaction(() => {
      chain.startBatch();
      const row = raw.prepare(`INSERT INTO audit (id, ts, request_id, principal, client_era, method, outcome, latency_ms) VALUES (1, ?, 'old', 'p', 'e', 'tools/call', 'ok', 1) RETURNING *`).get(NOW - 90_000) as AuditDbRow;
      expect(Object.keys(row)).not.toContain('trace_id');
      chain.append(row);
      chain.endBatch();
    })();
    raw.close();
    const [A, B] = ['4bf92f3577b34da6a3ce929d0e0e4736', '0af7651916cd43dd8448eb211c80319c'];
    ledger = Ledger.open({ path: t.db });
    await ledger.record(begin({ ts: NOW - 60_000, requestId: 'a-outer', traceId: A, spanId: '00f067aa0ba902b7' }), end());
    await ledger.record(begin({ ts: NOW - 50_000, requestId: 'b', traceId: B, spanId: '1111111111111111' }), end());
    await ledger.record(begin({ ts: NOW - 40_000, requestId: 'a-inner', traceId: A, spanId: 'b7ad6b7169203331', parentSpanId: '00f067aa0ba902b7' }), end());
    ledger.sync();
    await ledger.close();
    // Pasted in upper case it is the same id.
    const json = await cli(['ledger', 'query', '--db', t.db, '--json', '--trace-id', A.toUpperCase()]);
    expect(json.code, json.err).toBe(0);
    expect(json.out.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)).toEqual([
      expect.objectContaining({ requestId: 'a-outer', traceId: A, spanId: '00f067aa0ba902b7', parentSpanId: null }),
      expect.objectContaining({ requestId: 'a-inner', traceId: A, spanId: 'b7ad6b7169203331', parentSpanId: '00f067aa0ba902b7' }),
    ]);
    const table = (await cli(['ledger', 'query', '--db', t.db, '--trace-id', B])).out.trimEnd().split('\n');
    expect(table).toHaveLength(2);
    expect(table[1]).toMatch(new RegExp(`\\s${B}$`));
    const csv = (await cli(['ledger', 'export', '--db', t.db, '--format', 'csv', '--trace-id', B])).out.trimEnd().split('\n');
    const header = csv[0].split(',');
    expect(['traceId', 'spanId', 'parentSpanId'].map((c) => csv[1].split(',')[header.indexOf(c)])).toEqual([B, '1111111111111111', '']);
    expect((await cli(['ledger', 'query', '--db', t.db, '--json', '--trace-id', 'f'.repeat(32)])).out).toBe('');
    for (const bad of ['4bf92f35', `00-${A}-00f067aa0ba902b7-01`, 'g'.repeat(32)]) {
      expect(await cli(['ledger', 'query', '--db', t.db, '--trace-id', bad]), bad).toMatchObject({ code: 2, err: expect.stringMatching(/--trace-id must be a W3C trace id, 32 hex digits/) });
    }
    // The old row and the new ones verify as one chain; an id changed, or given to a row that had none, fails.
    expect(await cli(['ledger', 'verify', '--db', t.db])).toMatchObject({ code: 0, out: expect.stringMatching(/^ok: 4 rows verified/) });
    for (const [column, requestId, to] of [['trace_id', 'a-inner', B], ['span_id', 'old', '00f067aa0ba902b7']] as const) {
      const db = new Database(t.db);
      const id = db.prepare('SELECT id FROM audit WHERE request_id = ?').pluck().get(requestId) as number;
      const was = db.prepare(`SELECT ${column} FROM audit WHERE id = ?`).pluck().get(id);
      db.prepare(`UPDATE audit SET ${column} = ? WHERE id = ?`).run(to, id);
      db.close();
      const verified = await cli(['ledger', 'verify', '--db', t.db]);
      expect([verified.code, verified.out], column).toEqual([1, expect.stringMatching(new RegExp(`^FAILED at row ${id} \\(seq \\d+\\): hash mismatch`))]);
      const back = new Database(t.db);
      back.prepare(`UPDATE audit SET ${column} = ? WHERE id = ?`).run(was, id);
      back.close();
    }
  });

  it('rows chained before the group column verify after the upgrade, and so do rows with one; a group edited by hand fails verify', async () => {
    t = tempDir();
    // A ledger as a hub before migration 0013 left it, its rows chained as that hub chained them
    // (the digest of the row as stored, which had no tool_group).
    const raw = new Database(t.db);
    raw.pragma('journal_mode = WAL');
    const all = loadMigrations();
    const groupAt = all.findIndex((m) => m.name === 'audit_group');
    migrate(raw, all.slice(0, groupAt));
    const chain = new ChainWriter(raw);
    raw.transaction(() => {
      chain.startBatch();
      for (const id of [1, 2]) {
        const row = raw
          .prepare(`INSERT INTO audit (id, ts, request_id, principal, client_era, method, hub_name, outcome, latency_ms) VALUES (?, ?, ?, 'p', 'e', 'tools/call', 'fs__read', 'ok', 1) RETURNING *`)
          .get(id, NOW - 60_000 + id, `old-${id}`) as AuditDbRow;
        expect(Object.keys(row)).not.toContain('tool_group');
        chain.append(row);
      }
      chain.endBatch();
    })();
    raw.close();
    ledger = Ledger.open({ path: t.db });
    await ledger.record(begin({ ts: NOW - 1000, requestId: 'new-small', group: 'small' }), end());
    await ledger.record(begin({ ts: NOW - 500, requestId: 'new-all' }), end());
    ledger.sync();
    await ledger.close();
    expect(await cli(['ledger', 'verify', '--db', t.db])).toMatchObject({ code: 0, out: expect.stringMatching(/^ok: 4 rows verified/) });
    const edit = (sql: string, ...args: unknown[]) => {
      const db = new Database(t.db);
      db.prepare(sql).run(...args);
      db.close();
    };
    const idOf = (requestId: string) => {
      const db = new Database(t.db, { readonly: true });
      const id = db.prepare('SELECT id FROM audit WHERE request_id = ?').pluck().get(requestId) as number;
      db.close();
      return id;
    };
    // A row's group changed, given to a row that had none, or taken away: each fails, naming the row.
    for (const [requestId, to, back] of [
      ['new-small', 'other', 'small'],
      ['old-1', 'small', null],
      ['new-all', 'small', null],
      ['new-small', null, 'small'],
    ] as const) {
      edit('UPDATE audit SET tool_group = ? WHERE request_id = ?', to, requestId);
      const bad = await cli(['ledger', 'verify', '--db', t.db]);
      expect([bad.code, bad.out], `${requestId} → ${to}`).toEqual([1, expect.stringMatching(new RegExp(`^FAILED at row ${idOf(requestId)} \\(seq \\d+\\): hash mismatch`))]);
      edit('UPDATE audit SET tool_group = ? WHERE request_id = ?', back, requestId);
    }
    expect((await cli(['ledger', 'verify', '--db', t.db])).code).toBe(0);
  });

  it('stats per server and tool, as a table and as JSON', async () => {
    await seeded();
    const r = await cli(['ledger', 'stats', '--db', t.db]);
    expect(r.out).toMatch(/^server\s+method\s+name\s+calls\s+errors\s+error%\s+p50ms\s+p95ms\n/);
    expect(r.out).toMatch(/mem\s+tools\/call\s+mem__store\s+2\s+1\s+50\.0\s+20\s+40/);
    const j = await cli(['ledger', 'stats', '--db', t.db, '--json', '--since', '2h']);
    const objs = j.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { name: string; calls: number });
    expect(objs.map((o) => [o.name, o.calls])).toEqual([
      ['fs__read', 1],
      ['fs__write', 1],
      ['mem__load', 1],
      ['mem__store', 1],
    ]);
  });

  it('a replayed error reads and filters as replayed_error, apart from a replayed success, as /metrics labels them', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const at = (m: number, requestId: string) => begin({ ts: NOW - m * 60_000, requestId, hubName: 'fs__write', idempotencyKey: `k-${requestId}` });
    await ledger.record(at(3, 'first'), end({ outcome: 'rpc_error', errorKind: 'jsonrpc', errorCode: -32001, latencyMs: 5 }));
    await ledger.record(at(2, 'again-error'), end({ outcome: 'replayed', errorKind: 'jsonrpc', errorCode: -32001, latencyMs: 1 }));
    await ledger.record(at(1, 'again-ok'), end({ outcome: 'replayed', latencyMs: 1 }));
    await ledger.whenCommitted();
    ledger.sync();
    const outcomes = async (...args: string[]) =>
      (await cli(['ledger', 'query', '--db', t.db, ...args])).out.trimEnd().split('\n').slice(1).map((l) => l.split(/\s+/).slice(7, 9).join(' '));
    expect(await outcomes()).toEqual(['rpc_error -32001', 'replayed_error -32001', 'replayed 1']);
    expect(await outcomes('--outcome', 'replayed_error')).toEqual(['replayed_error -32001']);
    expect(await outcomes('--outcome', 'replayed')).toEqual(['replayed 1']);
    // The same selection in chain order (tail -f's polls) and in stats, whose outcomes say which.
    expect((await cli(['ledger', 'tail', '--db', t.db, '--outcome', 'replayed_error'])).out).toContain('replayed_error');
    const stats = JSON.parse((await cli(['ledger', 'stats', '--db', t.db, '--json'])).out) as { calls: number; errors: number; outcomes: Record<string, number> };
    expect(stats).toMatchObject({ calls: 3, errors: 2, outcomes: { rpc_error: 1, replayed_error: 1, replayed: 1 } });
    expect((await cli(['ledger', 'stats', '--db', t.db, '--json', '--outcome', 'replayed_error'])).out).toContain('"calls":1,"errors":1');
  });

  it("stats counts clients' requests only, as /metrics does: the hub's own event rows are said apart, and counted when asked for", async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const hubRow = { requestId: 'catalog', principal: 'hub', clientEra: '-', server: 'fs', clientInfo: undefined };
    await ledger.record(begin({ ts: NOW - 3000, hubName: 'fs__read' }), end({ latencyMs: 5 }));
    await ledger.record(begin({ ...hubRow, ts: NOW - 2000, method: 'catalog/quarantine', hubName: undefined }), end({ outcome: 'denied', errorKind: 'policy', latencyMs: 0 }));
    await ledger.record(begin({ ...hubRow, ts: NOW - 1000, requestId: 'plugin', method: 'plugin/onCall', hubName: 'fs__read' }), end({ outcome: 'rpc_error', errorCode: -32603, latencyMs: 0 }));
    await ledger.whenCommitted();
    ledger.sync();
    const r = await cli(['ledger', 'stats', '--db', t.db]);
    expect(r.out.trimEnd().split('\n').slice(1)).toEqual([expect.stringMatching(/^fs\s+tools\/call\s+fs__read\s+1\s+0\s+0\.0\s/)]);
    expect(r.err).toBe(
      "switchyard ledger stats: note: 2 rows of the hub's own events (catalog quarantines and drops, plugin failures) not counted as calls: `ledger query --principal hub` lists them, `ledger stats --principal hub` counts them\n",
    );
    expect((await cli(['ledger', 'stats', '--db', t.db, '--json'])).err).toBe('');
    const hub = (await cli(['ledger', 'stats', '--db', t.db, '--json', '--principal', 'hub'])).out.trimEnd().split('\n').map((l) => JSON.parse(l) as { method: string; errors: number });
    expect(hub.map((o) => [o.method, o.errors])).toEqual([
      ['catalog/quarantine', 1],
      ['plugin/onCall', 1],
    ]);
  });

  it('verify exits 0 on an intact chain and 1 naming the altered row', async () => {
    const l = await seeded();
    const ok = await cli(['ledger', 'verify', '--db', t.db]);
    // The seeded call still running is in no chain: a pass says so, on stderr, naming its id.
    const running = l.query({ outcome: 'in_flight' })[0].id;
    const note = `switchyard ledger verify: note: 1 row is in flight (id ${running}), in no chain and not verified: calls still running, or left by a hub that stopped (its next start chains them as unknown)\n`;
    expect(ok).toEqual({ out: expect.stringMatching(/^ok: 6 rows verified \(chain seq 1\.\.6\)\nhead: 6:[0-9a-f]{64}\n$/), err: note, code: 0 });
    // A row put in by hand as in flight would pass as one, and a start would chain it as unknown: named too.
    const forged = new Database(t.db);
    const fake = Number(forged.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, outcome) VALUES (1, '9', 'mallory', '2026-07-28', 'tools/call', 'fs__rm', 'in_flight')`).run().lastInsertRowid);
    forged.close();
    expect((await cli(['ledger', 'verify', '--db', t.db])).err).toContain(`2 rows are in flight (ids ${running}..${fake})`);
    expect(JSON.parse((await cli(['ledger', 'verify', '--db', t.db, '--json'])).out)).toMatchObject({ ok: true, rows: 6, inFlight: { rows: 2, firstId: running, lastId: fake } });
    const id = l.query({ outcome: 'rpc_error' })[0].id;
    const raw = new Database(t.db);
    raw.prepare(`UPDATE audit SET outcome='ok' WHERE id=?`).run(id);
    raw.close();
    const bad = await cli(['ledger', 'verify', '--db', t.db]);
    expect(bad.code).toBe(1);
    expect(bad.out).toBe(`FAILED at row ${id} (seq 3): hash mismatch: the row was changed after it was written\n`);
  });

  it('verify prints the head to keep elsewhere, and --witness holds a later chain to it', async () => {
    await seeded();
    const first = await cli(['ledger', 'verify', '--db', t.db]);
    const head = /^head: (.+)$/m.exec(first.out)![1]!;
    await ledger!.record(begin({ ts: NOW }), end());
    ledger!.sync();
    expect(await cli(['ledger', 'verify', '--db', t.db, '--witness', head])).toEqual({
      out: expect.stringMatching(/^ok: 7 rows verified \(chain seq 1\.\.7\), 1 witness held\nhead: 7:[0-9a-f]{64}\n$/),
      err: expect.stringMatching(/^switchyard ledger verify: note: 1 row is in flight \(id \d+\)/),
      code: 0,
    });
    const json = await cli(['ledger', 'verify', '--db', t.db, '--json', '--witness', head, '--witness', head]);
    expect(JSON.parse(json.out)).toMatchObject({ ok: true, rows: 7, headSeq: 7, witnesses: 2, head: expect.stringMatching(/^7:[0-9a-f]{64}$/) });

    // The row at seq 3 changed and every hash after it recomputed, head included: only the witness shows it.
    const raw = new Database(t.db);
    raw.transaction(() => {
      raw.prepare(`UPDATE audit SET outcome = 'ok' WHERE seq = 3`).run();
      let prev = (raw.prepare('SELECT hash FROM audit WHERE seq = 2').get() as { hash: string }).hash;
      for (const row of raw.prepare('SELECT * FROM audit WHERE seq >= 3 ORDER BY seq').all() as Record<string, unknown>[]) {
        prev = rowDigest(prev, row);
        raw.prepare('UPDATE audit SET hash = ? WHERE id = ?').run(prev, row.id);
      }
      raw.prepare('UPDATE chain_state SET head_hash = ? WHERE id = 1').run(prev);
    })();
    raw.close();
    expect((await cli(['ledger', 'verify', '--db', t.db])).code).toBe(0);
    const caught = await cli(['ledger', 'verify', '--db', t.db, '--witness', head]);
    expect(caught.code).toBe(1);
    expect(caught.out).toMatch(/^FAILED at row \d+ \(seq 6\): the chain was rewritten: the row at seq 6 has hash [0-9a-f]{16}… where the witness holds [0-9a-f]{16}…\n$/);
    expect(JSON.parse((await cli(['ledger', 'verify', '--db', t.db, '--json', '--witness', head])).out)).toMatchObject({ ok: false, seq: 6 });

    const bad = await cli(['ledger', 'verify', '--db', t.db, '--witness', '6:abc']);
    expect(bad).toEqual({ out: '', err: 'switchyard ledger verify: --witness "6:abc" is not <seq>:<64 hex digits>, as verify prints the head\n', code: 2 });
    // The witness left out (a script's unset variable): verified against none, it passed. A usage error (yargs' own).
    for (const args of [['--witness'], ['--witness', '--json']]) {
      const none = await cli(['ledger', 'verify', '--db', t.db, ...args]).catch((e: Error) => e);
      expect(none, args.join(' ')).toMatchObject({ message: 'Not enough arguments following: witness' });
    }

    // The chain's anchor and head deleted by hand: verify fails saying so; tail says so too (no TypeError).
    const gone = new Database(t.db);
    gone.prepare('DELETE FROM chain_state').run();
    gone.close();
    const unanchored = await cli(['ledger', 'verify', '--db', t.db]);
    expect(unanchored.code).toBe(1);
    expect(unanchored.out).toMatch(/^FAILED: the ledger's chain state \(its anchor and head, table chain_state\) is gone: the file was changed outside the hub/);
    expect(JSON.parse((await cli(['ledger', 'verify', '--db', t.db, '--json'])).out)).toMatchObject({ ok: false, rowId: null, seq: null });
    const tail = await cli(['ledger', 'tail', '--db', t.db]);
    expect([tail.code, tail.err]).toEqual([1, expect.stringMatching(/^switchyard ledger tail: the ledger's chain state .* is gone/)]);
  });

  it('export writes JSON lines or CSV of every matching row', async () => {
    await seeded();
    const jsonl = await cli(['ledger', 'export', '--db', t.db]);
    const objs = jsonl.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { id: number; outcome: string });
    expect(objs).toHaveLength(7);
    expect(objs.map((o) => o.id)).toEqual([...objs.map((o) => o.id)].sort((a, b) => a - b));
    // Each finished row carries its chain link, so an export can be held against the database later.
    const finished = objs.filter((o) => o.outcome !== 'in_flight') as { hash?: unknown; seq?: unknown }[];
    expect(finished.length).toBeGreaterThan(0);
    for (const o of finished) expect(o.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(objs.find((o) => o.outcome === 'in_flight')).toMatchObject({ hash: null, seq: null });
    const csv = await cli(['ledger', 'export', '--db', t.db, '--format', 'csv', '--server', 'mem']);
    const lines = csv.out.trimEnd().split('\n');
    expect(lines[0].split(',').slice(0, 4)).toEqual(['id', 'seq', 'ts', 'requestId']);
    expect(lines[0].split(',').at(-1)).toBe('hash');
    expect(lines).toHaveLength(4);
    expect(lines[1]).toContain('"{""q"":""say \\""hi\\"", ok""}"');
    const bad = await cli(['ledger', 'export', '--db', t.db, '--format', 'xml']).catch((e: Error) => e);
    expect(bad).toBeInstanceOf(Error);
    // --format with its value left out was JSON lines without a word, whatever was meant.
    expect(await cli(['ledger', 'export', '--db', t.db, '--format', '--server', 'mem']).catch((e: Error) => e)).toMatchObject({ message: 'Not enough arguments following: format' });
  });

  it('export waits while its output takes no more, and holds no read of the ledger open meanwhile', async () => {
    t = tempDir();
    Ledger.open({ path: t.db }).close();
    const raw = new Database(t.db);
    const ins = raw.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, hub_name, server, outcome) VALUES (?, ?, 'alice', '2026-07-28', 'tools/call', 'fs__read', 'fs', 'in_flight')`);
    // About 1 MB of JSON lines: many writes of the export's 64 KiB, several of its pages.
    raw.transaction(() => {
      for (let i = 0; i < 2500; i++) ins.run(NOW - 4000 + i, `r${i}`);
    })();
    ins.run(NOW, 'in-the-wal'); // the export's snapshot, while it has one, holds WAL frames
    let writes = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const run = cli(['ledger', 'export', '--db', t.db], { onOut: () => (++writes === 1 ? held : undefined) });
    await until(() => writes, (n) => n > 0, 5000);
    await new Promise((r) => setTimeout(r, 50));
    // A pipe's slow reader: nothing more is produced (queued in memory) until it takes more.
    expect(writes).toBe(1);
    // And the hub's WAL can be rewound meanwhile: no snapshot is kept for the rows still to come.
    ins.run(NOW + 1, 'after-the-start');
    expect((raw.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[])[0].busy).toBe(0);
    release();
    const r = await run;
    expect(r.code).toBe(0);
    const ids = r.out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { requestId: string }).requestId);
    // Every row there when it began, once each, oldest first; none given an id after it began.
    expect(ids).toEqual([...Array.from({ length: 2500 }, (_, i) => `r${i}`), 'in-the-wal']);
    expect(writes).toBeGreaterThan(10);
    raw.close();
  });

  // export read the id of every matching row into one array before its first row (8 bytes a row:
  // 80 MB for ten million), and query every id up to its --limit.
  it('export and query hold the ids they match a page at a time, however many match', async () => {
    t = tempDir();
    Ledger.open({ path: t.db }).close();
    const raw = new Database(t.db);
    const ins = raw.prepare(`INSERT INTO audit (ts, request_id, principal, client_era, method, server, outcome) VALUES (?, ?, 'alice', '2026-07-28', 'tools/list', ?, 'in_flight')`);
    raw.transaction(() => {
      for (let i = 0; i < 5000; i++) ins.run(NOW - 5000 + i, `r${i}`, i % 2 ? 'odd' : 'even');
    })();
    // Every read of the ledger, seen as it returns: what one read hands over is held at once.
    const statement = Object.getPrototypeOf(raw.prepare('SELECT 1')) as { all: (...args: unknown[]) => unknown[] };
    raw.close();
    const reads = vi.spyOn(statement, 'all');
    const most = (): number => Math.max(...reads.mock.results.map((r) => (r.value as unknown[]).length));
    const requestIds = (out: string): string[] => out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { requestId: string }).requestId);
    try {
      // A page is 1,000 rows: 5,000 matching are five pages, never one read of 5,000 ids.
      const all = await cli(['ledger', 'export', '--db', t.db]);
      expect(requestIds(all.out)).toEqual(Array.from({ length: 5000 }, (_, i) => `r${i}`));
      expect(most()).toBe(1000);
      reads.mockClear();
      // Served by an index (server, ts), the ids still come out oldest first by id.
      const odd = await cli(['ledger', 'export', '--db', t.db, '--server', 'odd', '--format', 'csv']);
      expect(odd.out.trimEnd().split('\n').slice(1).map((l) => l.split(',')[3])).toEqual(Array.from({ length: 2500 }, (_, i) => `r${2 * i + 1}`));
      expect(most()).toBe(1000);
      reads.mockClear();
      const newest = await cli(['ledger', 'query', '--json', '--limit', '4500', '--db', t.db]);
      expect(requestIds(newest.out)).toEqual(Array.from({ length: 4500 }, (_, i) => `r${i + 500}`));
      expect(most()).toBe(1000);
      reads.mockClear();
      const table = await cli(['ledger', 'query', '--limit', '4500', '--server', 'even', '--db', t.db]);
      expect(table.out.trimEnd().split('\n')).toHaveLength(2501);
      expect(table.err).toBe('');
      expect(most()).toBe(1000);
    } finally {
      reads.mockRestore();
    }
  });

  it('query --json writes its lines a chunk at a time, each waited for', async () => {
    const raw = inFlightRows(1200);
    raw.close();
    let writes = 0;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const run = cli(['ledger', 'query', '--json', '--limit', '1200', '--db', t.db], { onOut: () => (++writes === 1 ? held : undefined) });
    await until(() => writes, (n) => n > 0, 5000);
    await new Promise((r) => setTimeout(r, 50));
    expect(writes).toBe(1);
    release();
    const r = await run;
    // Not one string of every line (with the lines and the bytes written, three copies of 100,000 rows).
    expect(writes).toBeGreaterThan(1);
    expect(r.out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { requestId: string }).requestId)).toEqual(Array.from({ length: 1200 }, (_, i) => `r${i}`));
  });

  it('query writes its rows as it reads them, a page at a time, table or JSON, the table as table() would', async () => {
    const raw = inFlightRows(1200);
    for (const json of [false, true]) {
      raw.prepare(`UPDATE audit SET method = 'tools/list' WHERE request_id = 'r1199'`).run();
      // While the first write waits, the newest row changes: read after the output began, it shows so.
      const r = await writesAsItReads(raw, ['ledger', 'query', '--limit', '1200', '--db', t.db, ...(json ? ['--json'] : [])]);
      const reader = new LedgerReader(new Database(t.db, { readonly: true }));
      const rows = reader.query({ limit: 1200 }).reverse();
      reader.close();
      expect(rows.at(-1)).toMatchObject({ requestId: 'r1199', method: 'tools/call' });
      expect(r.out).toBe(json ? rows.map((x) => JSON.stringify(rowJson(x)) + '\n').join('') : table(ROW_HEADER, rows.map(rowCells)));
    }
    raw.close();
  });

  // With ledger.storeBodies a row keeps up to 1 MiB of arguments and of result: a page of 1,000
  // rows (export, query, tail's first rows) was up to 2 GiB in memory at once.
  it('reads rows with big bodies a few at a time: a page holds at most its bytes of bodies, but for its first row', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true });
    for (let i = 0; i < 6; i++) await ledger.record(begin({ ts: NOW + i, requestId: `b${i}`, args: { big: 'x'.repeat(i === 0 ? 300_000 : 100_000) } }), end());
    await ledger.whenCommitted();
    ledger.sync();
    const reader = new LedgerReader(new Database(t.db, { readonly: true }));
    const ids = reader.queryIds({ limit: 10 });
    const pages = [...reader.rowsOf(ids, 'ts', 1000, 250_000)];
    reader.close();
    expect(pages.map((p) => p.map((r) => r.requestId))).toEqual([['b0'], ['b1', 'b2'], ['b3', 'b4'], ['b5']]);
  });

  it('the ids query keeps in SQLite give the same pages as the array of them, bounded by bodies or by rows', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true });
    for (let i = 0; i < 7; i++) await ledger.record(begin({ ts: NOW + i, requestId: `b${i}`, args: { big: 'x'.repeat(i === 1 ? 300_000 : 100_000) } }), end());
    await ledger.whenCommitted();
    ledger.sync();
    const reader = new LedgerReader(new Database(t.db, { readonly: true }));
    const read = (ids: { length: number; slice(a: number, b: number): number[] }, size: number, bytes: number) => [...reader.rowsOf(ids, 'ts', size, bytes)].map((p) => p.map((r) => r.requestId));
    for (const limit of [1, 6, 7, 50]) {
      const kept = reader.keepQueryIds({ limit });
      try {
        expect(kept.length).toBe(Math.min(limit, 7));
        expect(kept.slice(0, 100)).toEqual(reader.queryIds({ limit }));
        for (const [size, bytes] of [[1000, 250_000], [2, 10_000_000], [3, 250_000]] as const) expect(read(kept, size, bytes)).toEqual(read(reader.queryIds({ limit }), size, bytes));
      } finally {
        kept.close();
      }
    }
    expect(read(reader.queryIds({ limit: 7 }), 1000, 250_000)).toEqual([['b0'], ['b1'], ['b2', 'b3'], ['b4', 'b5'], ['b6']]);
    // Closed, each kept list is gone from the connection's temporary database.
    expect(reader.db.prepare(`SELECT count(*) FROM temp.sqlite_master`).pluck().get()).toBe(0);
    reader.close();
  });

  it('tail writes its first rows as it reads them too, as table() would', async () => {
    t = tempDir();
    const l = Ledger.open({ path: t.db });
    for (let i = 0; i < 1200; i++) l.begin(begin({ ts: NOW - 1200 + i, requestId: `r${i}`, method: 'tools/list' })).finish(end());
    await l.whenCommitted();
    l.sync();
    l.close();
    const raw = new Database(t.db);
    const r = await writesAsItReads(raw, ['ledger', 'tail', '-n', '1200', '--db', t.db]);
    const reader = new LedgerReader(new Database(t.db, { readonly: true }));
    const rows = [...reader.rowsOf(reader.lastFinishedIds({}, 1200).ids, 'seq')].flat();
    reader.close();
    raw.close();
    expect(rows.at(-1)).toMatchObject({ requestId: 'r1199', method: 'tools/call' });
    expect(r.out).toBe(table(ROW_HEADER, rows.map(rowCells)));
  });

  it('prune deletes old finished rows and the chain still verifies', async () => {
    await seeded();
    const r = await cli(['ledger', 'prune', '--db', t.db, '--before', '110m']);
    // The new anchor, to keep as a witness: rows deleted from the start by hand later fail it.
    const when = new Date(NOW - 110 * 60_000).toISOString();
    expect(r).toMatchObject({ code: 0, out: expect.stringMatching(new RegExp(`^pruned 3 rows older than ${when.replace(/\./g, '\\.')}\nanchor: 3:[0-9a-f]{64}\n$`)) });
    const kept = /^anchor: (3:[0-9a-f]{64})$/m.exec(r.out)![1]!;
    const v = await cli(['ledger', 'verify', '--db', t.db, '--witness', kept]);
    expect(v.out).toMatch(/^ok: 3 rows verified \(chain seq 4\.\.6\), 1 witness held\nhead: 6:/);
    // A "prune" by hand (row seq 4 deleted, the anchor moved onto it) passes a plain verify, and
    // a witness of the head; the anchor the real prune printed fails it.
    const copy = join(t.dir, 'copy.db');
    ledger!.sync();
    new Database(t.db).exec(`VACUUM INTO '${copy}'`);
    const raw = new Database(copy);
    const four = raw.prepare('SELECT hash FROM audit WHERE seq = 4').pluck().get() as string;
    raw.prepare('DELETE FROM audit WHERE seq = 4').run();
    raw.prepare('UPDATE chain_state SET anchor_seq = 4, anchor_hash = ? WHERE id = 1').run(four);
    raw.close();
    const head = /^head: (.+)$/m.exec(v.out)![1]!;
    expect((await cli(['ledger', 'verify', '--db', copy, '--witness', head])).code).toBe(0);
    const caught = await cli(['ledger', 'verify', '--db', copy, '--witness', kept]);
    expect(caught, caught.out + caught.err).toMatchObject({ code: 1, out: expect.stringMatching(/FAILED at row - \(seq 3\): the witness's row \(seq 3\) was pruned: .*if no prune you ran .* reached seq 4, rows were deleted from the chain's start by hand/) });
    // The running writer's in-flight row is untouched and it keeps chaining after the prune.
    expect(ledger!.query({ outcome: 'in_flight' })).toHaveLength(1);
    await ledger!.record(begin({ ts: NOW }), end());
    ledger!.sync();
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 4 rows verified \(chain seq 4\.\.7\)\nhead: 7:/);
  });

  // `prune --before 2099-01-01` deleted every finished row, the whole audit trail, without a word.
  it('prune refuses a --before later than now (exit 2, nothing deleted) unless --allow-future, and says how many rows it deleted', async () => {
    await seeded();
    const refused = await cli(['ledger', 'prune', '--db', t.db, '--before', '2099-01-01']);
    expect(refused).toEqual({
      out: '',
      err: 'switchyard ledger prune: --before 2099-01-01T00:00:00.000Z is later than now: every finished row would be deleted; give --allow-future to mean that\n',
      code: 2,
    });
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 6 rows verified/);
    // A minute ahead is later than now too; asked for, every finished row goes, the call in flight stays.
    const later = new Date(NOW + 60_000).toISOString();
    expect((await cli(['ledger', 'prune', '--db', t.db, '--before', later])).code).toBe(2);
    const all = await cli(['ledger', 'prune', '--db', t.db, '--before', later, '--allow-future']);
    expect(all).toMatchObject({ code: 0, err: '', out: expect.stringMatching(new RegExp(`^pruned 6 rows older than ${later.replace(/\./g, '\\.')}\nanchor: 6:[0-9a-f]{64}\n$`)) });
    expect(ledger!.query({ outcome: 'in_flight' })).toHaveLength(1);
    // It said "(chain seq 7..6)".
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 0 rows verified \(none after seq 6, where it was pruned\)\nhead: 6:[0-9a-f]{64}\n$/);
  });

  // It said "(chain seq 1..0)" of a fresh hub's ledger.
  it('verify of a ledger with no row yet says so', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    expect(await cli(['ledger', 'verify', '--db', t.db])).toEqual({ out: `ok: 0 rows verified (no row written yet)\nhead: 0:${'0'.repeat(64)}\n`, err: '', code: 0 });
  });

  // Every count was `${n} rows`: "pruned 1 rows", "ok: 1 rows verified", doctor's "(1 rows)".
  it('a count of one says row, not rows: prune, verify, the note of query --limit 1, doctor', async () => {
    await seeded();
    expect((await cli(['ledger', 'prune', '--db', t.db, '--before', '170m'])).out).toMatch(/^pruned 1 row older than /);
    expect((await cli(['ledger', 'prune', '--db', t.db, '--before', '20m'])).out).toMatch(/^pruned 4 rows older than /);
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 1 row verified \(chain seq 6\.\.6\)\nhead: 6:/);
    expect(ledgerFinding({ ledger: { enabled: true, path: t.db } } as HubConfig).message).toMatch(/: hash chain verified \(1 row\); 1 row is in flight/);
    const one = await cli(['ledger', 'query', '--db', t.db, '--limit', '1']);
    expect(one.err).toBe('switchyard ledger query: note: the newest matching row; more may match (--limit N shows more)\n');
  });

  // prune opens the ledger to write: it created a new empty ledger (and its folder) at a
  // mistyped path and said "pruned 0 rows", exit 0, where query says there is none.
  it('prune on a missing database says so as query does, and creates nothing', async () => {
    t = tempDir();
    const typo = join(t.dir, 'typo', 'x.db');
    for (const sub of [['query'], ['prune', '--before', '30d']]) {
      expect(await cli(['ledger', ...sub, '--db', typo]), sub[0]).toEqual({ out: '', err: `switchyard ledger ${sub[0]}: no ledger database at ${typo}\n`, code: 1 });
    }
    expect(existsSync(join(t.dir, 'typo'))).toBe(false);
    // A file that is no ledger (here an empty one) is not made one either.
    const empty = join(t.dir, 'empty.db');
    writeFileSync(empty, '');
    expect(await cli(['ledger', 'prune', '--before', '30d', '--db', empty])).toMatchObject({ code: 1, err: expect.stringMatching(/is not a Switchyard ledger/) });
    expect(statSync(empty).size).toBe(0);
  });

  // SQLite calls a folder given as the database a "disk I/O error"; prune took its links for names.
  it('a folder given as the database is named as a folder, by every command', async () => {
    t = tempDir();
    for (const sub of [['query'], ['verify'], ['stats'], ['export'], ['prune', '--before', '30d']]) {
      expect(await cli(['ledger', ...sub, '--db', t.dir]), sub[0]).toEqual({
        out: '',
        err: `switchyard ledger ${sub[0]}: ${t.dir} is a folder, not a ledger database (give the file, such as ${join(t.dir, 'ledger.db')})\n`,
        code: 1,
      });
    }
  });

  // SQLite's "file is not a database" named no file: the operator could not tell which (--db, ledger.path).
  it('a file that is no SQLite database is named, by every command', async () => {
    t = tempDir();
    const junk = join(t.dir, 'notes.txt');
    writeFileSync(junk, 'not a database, but long enough to have a header SQLite reads\n'.repeat(4));
    for (const sub of [['query'], ['verify'], ['stats'], ['export'], ['keys'], ['prune', '--before', '30d']]) {
      expect(await cli(['ledger', ...sub, '--db', junk]), sub[0]).toEqual({ out: '', err: `switchyard ledger ${sub[0]}: ${junk}: file is not a database (SQLITE_NOTADB)\n`, code: 1 });
    }
  });

  // A hard link is another name with its own -wal: a prune through it would write beside the hub's.
  it('prune refuses a ledger that has another name (a hard link), under either name', async () => {
    await seeded();
    const other = join(t.dir, 'other.db');
    linkSync(t.db, other);
    for (const db of [t.db, other]) {
      expect(await cli(['ledger', 'prune', '--db', db, '--before', '110m'])).toMatchObject({ code: 1, err: expect.stringMatching(/^switchyard ledger prune: the ledger .* has 2 names \(hard links\)/) });
    }
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 6 rows verified/); // nothing pruned
  });

  it('reading commands leave a running hub alone (read-only; in-flight rows stay in flight)', async () => {
    await seeded();
    await cli(['ledger', 'query', '--db', t.db]);
    await cli(['ledger', 'verify', '--db', t.db]);
    expect(ledger!.query({ outcome: 'in_flight' })).toHaveLength(1);
  });

  it('notes records a stopped hub left in its pending file, but not while a hub holds the ledger', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 3_600_000, backgroundCheckpoint: false });
    await ledger.record(begin(), end());
    const stopped = await cli(['ledger', 'query', '--db', t.db]);
    expect(stopped.err).toMatch(/note: 1 call \(begun or finished\) that a hub wrote before it stopped is in .*ledger\.db-pending, not yet in the database; the hub's next start applies them/);
    writeFileSync(`${t.db}.lock`, JSON.stringify({ pid: process.pid, command: 'switchyard start', started: processStart(process.pid) }));
    // Only that the table is empty (the row is on its way in).
    expect((await cli(['ledger', 'query', '--db', t.db])).err).toBe('switchyard ledger query: note: no rows match\n');
    rmSync(`${t.db}.lock`);
    ledger.sync();
    expect((await cli(['ledger', 'query', '--db', t.db])).err).toBe('');
  });

  it('prune does not upgrade the ledger of a running hub of an older Switchyard (that hub could not start on it again)', async () => {
    t = tempDir();
    const raw = new Database(t.db);
    raw.pragma('journal_mode = WAL');
    migrate(raw, loadMigrations().slice(0, 9)); // as a hub of schema 9 left it
    raw.close();
    const version = () => {
      const db = new Database(t.db, { readonly: true });
      try {
        return schemaVersion(db);
      } finally {
        db.close();
      }
    };
    // That hub, running: a process whose arguments hold `start`, its lock as those builds wrote it.
    const hub = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30_000)', 'start'], { stdio: 'ignore' });
    try {
      writeFileSync(`${t.db}.lock`, JSON.stringify({ pid: hub.pid, command: 'switchyard start' }));
      const held = await cli(['ledger', 'prune', '--db', t.db, '--before', '1d']);
      expect(held.code).toBe(1);
      expect(held.err).toMatch(/schema version 9, older than this Switchyard \(\d+\), and a hub of that older Switchyard writes it \(pid \d+, switchyard start\); it is not upgraded under that hub/);
      expect(version()).toBe(9);
    } finally {
      hub.kill();
    }
    rmSync(`${t.db}.lock`); // stopped: the CLI may upgrade it, as this version's start would
    expect((await cli(['ledger', 'prune', '--db', t.db, '--before', '1d'])).code).toBe(0);
    expect(version()).toBe(loadMigrations().length);
  });

  it("reading commands and doctor read an older Switchyard's ledger as it is: not refused, not upgraded", async () => {
    t = tempDir();
    const raw = new Database(t.db);
    raw.pragma('journal_mode = WAL');
    migrate(raw, loadMigrations().slice(0, 9)); // as a hub of schema 9 (before audit_pruned) left it
    raw.prepare(`INSERT INTO audit (id, ts, request_id, principal, client_era, method, outcome) VALUES (1, 1, 'r', 'p', 'e', 'tools/list', 'in_flight')`).run();
    raw.close();
    // And a line that hub's pending file still held when it stopped.
    writeFileSync(`${t.db}-pending`, line({ id: 2, ts: 2, request_id: 'q', principal: 'p', client_era: 'e', method: 'tools/call' }) + '\n');
    const query = await cli(['ledger', 'query', '--db', t.db]);
    expect(query).toMatchObject({ code: 0, out: expect.stringMatching(/tools\/list/) });
    expect(query.err).toMatch(/note: 1 call \(begun or finished\) that a hub wrote before it stopped/);
    expect(await cli(['ledger', 'verify', '--db', t.db])).toMatchObject({ code: 0, out: expect.stringMatching(/^ok: 0 rows verified/) });
    // It has no tool_group: a group filter is refused by name, not answered with no rows.
    expect(await cli(['ledger', 'query', '--db', t.db, '--group', 'small'])).toMatchObject({ code: 1, out: '', err: expect.stringMatching(/does not record tool groups yet/) });
    expect(await cli(['ledger', 'query', '--db', t.db, '--trace-id', '4bf92f3577b34da6a3ce929d0e0e4736'])).toMatchObject({ code: 1, out: '', err: expect.stringMatching(/does not record trace ids yet/) });
    expect((await cli(['ledger', 'query', '--db', t.db, '--json'])).out).toMatch(/"group":null/);
    // Export reads the columns that ledger lacks as null too.
    expect((await cli(['ledger', 'export', '--db', t.db])).out).toMatch(/^\{"id":1,.*"group":null,.*"traceId":null,"spanId":null,"parentSpanId":null,.*\}\n$/);
    const doctor = ledgerFinding({ ledger: { enabled: true, path: t.db } } as HubConfig);
    expect(doctor.level).toBe('ok');
    expect(doctor.message).toMatch(new RegExp(`at schema version 9, which this Switchyard's start upgrades to ${loadMigrations().length}`));
    const db = new Database(t.db, { readonly: true });
    expect(schemaVersion(db)).toBe(9);
    db.close();
  });

  it('the note counts only calls a start would still apply: not lines of rows in SQLite already, nor of pruned rows', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    const a = ledger.begin(begin({ requestId: 'a', ts: 1 }));
    await ledger.record(begin({ requestId: 'b', ts: 2 }), end());
    const c = ledger.begin(begin({ requestId: 'c', ts: 3 }));
    await a.finish(end());
    ledger.sync(); // a and b finished in SQLite, c in flight; the file emptied
    await ledger.close(); // c stays in flight: nothing reopens the file before the CLI reads it
    ledger = undefined;
    const start = (id: number, requestId: string, ts: number) => ({ id, ts, request_id: requestId, principal: 'p', client_era: 'e', method: 'tools/call' });
    const fin = { outcome: 'ok', latency_ms: 1 };
    // As a killed hub leaves the file: a and b committed but not emptied from it, c's finish
    // and d (begin and finish) never committed.
    writeFileSync(
      `${t.db}-pending`,
      [line(start(a.rowId, 'a', 1)), line(start(a.rowId, 'a', 1), fin), line(start(a.rowId + 1, 'b', 2), fin), line(start(c.rowId, 'c', 3), fin), line(start(99, 'd', 4)), line(start(99, 'd', 4), fin)].join('\n') + '\n',
    );
    const note = /note: (\d+) (?:calls?|records) \((?:calls )?begun or finished\)/; // this wording, or the one before
    expect(note.exec((await cli(['ledger', 'stats', '--db', t.db])).err)?.[1]).toBe('2');
    // a and b pruned (c is in flight, not prunable): they stay uncounted, a start skips them.
    expect((await cli(['ledger', 'prune', '--db', t.db, '--before', '1970-01-01T00:00:01Z'])).out).toMatch(/^pruned 2 rows/);
    expect(note.exec((await cli(['ledger', 'stats', '--db', t.db])).err)?.[1]).toBe('2');
    ledger = Ledger.open({ path: t.db, backgroundCheckpoint: false });
    expect(ledger.query({}).map((r) => [r.requestId, r.outcome]).sort()).toEqual([
      ['c', 'ok'],
      ['d', 'ok'],
    ]);
  });

  it('tail shows the last finished calls and follows new ones as they finish', async () => {
    const l = await seeded();
    const ac = new AbortController();
    let resolveSeen!: () => void;
    const seen = new Promise<void>((r) => (resolveSeen = r));
    const running = cli(['ledger', 'tail', '--db', t.db, '-n', '2', '-f', '--json'], {
      signal: ac.signal,
      onOut: (out) => {
        if (out.includes('"tool":"late__one"')) resolveSeen();
      },
    });
    await new Promise((r) => setTimeout(r, 60));
    const h = l.begin(begin({ hubName: 'late__one' }));
    await new Promise((r) => setTimeout(r, 60));
    await h.finish(end({ outcome: 'cancelled' }));
    await seen;
    ac.abort();
    const r = await running;
    const objs = r.out.trimEnd().split('\n').map((x) => JSON.parse(x) as { tool: string; outcome: string });
    expect(objs.map((o) => o.tool)).toEqual(['fs__read', 'mem__load', 'late__one']);
    expect(objs[2].outcome).toBe('cancelled'); // printed once, finished
    // --since and --until narrow tail as they narrow query.
    const future = await cli(['ledger', 'tail', '--db', t.db, '--since', new Date(NOW + 3_600_000).toISOString(), '--json']);
    expect(future.out).toBe('');
    const past = await cli(['ledger', 'tail', '--db', t.db, '--until', new Date(0).toISOString(), '--json']);
    expect(past.out).toBe('');
  });

  // The hub commits whenever it likes; tail -f read its page and the chain head one statement
  // after the other, each on a snapshot of its own, so rows committed in between were counted
  // as read and never printed. The reader's reads are the seam: right after the first page, and
  // after an empty poll, rows are committed (Ledger.sync() waits for the ingest thread's commit).
  it("tail -f's polls read the rows past its chain position by the chain's index, whatever the filter", () => {
    t = tempDir();
    Ledger.open({ path: t.db }).close();
    const reader = LedgerReader.open({ path: t.db });
    try {
      const prepared: string[] = [];
      const prepare = reader.db.prepare.bind(reader.db);
      vi.spyOn(reader.db, 'prepare').mockImplementation(((sql: string) => (prepared.push(sql), prepare(sql))) as typeof reader.db.prepare);
      for (const f of [{ server: 's' }, { group: 'g', since: 1 }, { principal: 'p', outcome: 'ok', tool: 't', until: 5 }, {}]) {
        prepared.length = 0;
        reader.query({ ...f, afterSeq: 10, limit: 1000 });
        const sql = prepared.find((q) => q.startsWith('SELECT id, seq, ts,'))!;
        const plan = (reader.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all({ ...whereClause({ ...f, afterSeq: 10 }).params, limit: 1000 }) as { detail: string }[]).map((r) => r.detail);
        // By a filter's own index it walked every row of that server (or group, or time) ever, and sorted them, each poll.
        expect(plan, JSON.stringify(f)).toEqual([expect.stringMatching(/^SEARCH audit USING INDEX \S+ \(seq>\?\)$/)]);
      }
    } finally {
      reader.close();
    }
  });

  it('tail -f prints rows committed between its reads of the page and of the head', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, ingestDelayMs: 3_600_000, backgroundCheckpoint: false });
    const l = ledger;
    for (const name of ['old__one', 'old__two']) await l.record(begin({ hubName: name }), end());
    l.sync();
    await l.record(begin({ hubName: 'race__first' }), end()); // pending: committed by the spy below
    let commitAfterFirst = true;
    let commitAfterEmptyPoll = false;
    const firstIds = LedgerReader.prototype.lastFinishedIds;
    const after = LedgerReader.prototype.idsAfterSeq;
    const spies = [
      vi.spyOn(LedgerReader.prototype, 'lastFinishedIds').mockImplementation(function (this: LedgerReader, ...args) {
        const rows = firstIds.apply(this, args);
        if (commitAfterFirst) l.sync();
        commitAfterFirst = false;
        return rows;
      }),
      vi.spyOn(LedgerReader.prototype, 'idsAfterSeq').mockImplementation(function (this: LedgerReader, ...args) {
        const rows = after.apply(this, args);
        if (commitAfterEmptyPoll && rows.ids.length === 0) {
          commitAfterEmptyPoll = false;
          l.sync();
        }
        return rows;
      }),
    ];
    try {
      const ac = new AbortController();
      let out = '';
      const running = cli(['ledger', 'tail', '--db', t.db, '-n', '5', '-f', '--json'], { signal: ac.signal, onOut: (o) => void (out = o) });
      expect(await until(() => out, (o) => o.includes('race__first'), 3_000)).toContain('race__first');
      await l.record(begin({ hubName: 'race__second' }), end());
      commitAfterEmptyPoll = true;
      await until(() => commitAfterEmptyPoll, (armed) => !armed, 3_000);
      expect(await until(() => out, (o) => o.includes('race__second'), 3_000)).toContain('race__second');
      ac.abort();
      const r = await running;
      expect(r.code).toBe(0);
      const tools = r.out.trimEnd().split('\n').map((x) => (JSON.parse(x) as { tool: string }).tool);
      expect(tools).toEqual(['old__one', 'old__two', 'race__first', 'race__second']); // each once
    } finally {
      for (const s of spies) s.mockRestore();
    }
  });

  // Each page of tail -f was aligned on its own: a row of short names had columns narrower
  // than the header's, the next page's wider or narrower again.
  it('tail -f writes its later rows in the columns of the lines before: widened for a wider cell, never narrowed', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const l = ledger;
    await l.record(begin({ hubName: 'fs__read' }), end());
    l.sync();
    const ac = new AbortController();
    let out = '';
    const running = cli(['ledger', 'tail', '--db', t.db, '-n', '1', '-f'], { signal: ac.signal, onOut: (o) => void (out = o) });
    await until(() => out, (o) => o.includes('fs__read'), 3_000);
    // One page each: a row of short names, one with a longer tool name than any before, a short one again.
    for (const [principal, hubName] of [['bo', 'a__b'], ['bo', 'fs__a_much_longer_name'], ['bo', 'c__d']]) {
      await l.record(begin({ principal, hubName }), end());
      l.sync();
      expect(await until(() => out, (o) => o.includes(hubName), 3_000)).toContain(hubName);
    }
    ac.abort();
    const r = await running;
    expect(r.code, r.err).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    const eras = lines.map((x, i) => x.indexOf(i === 0 ? 'eras' : '2026-07-28→'));
    const [header, wide] = [eras[0]!, eras[3]!];
    expect(wide).toBeGreaterThan(header);
    expect(eras).toEqual([header, header, header, wide, wide]);
  });

  it('query lists the rows its filter picked as they are when read: a call that finished meanwhile is listed, finished, not left out', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    for (const hubName of ['fs__one', 'fs__two', 'fs__three']) ledger.begin(begin({ ts: NOW - 60_000, hubName }));
    await ledger.whenCommitted();
    ledger.sync();
    const raw = new Database(t.db);
    let finished = false;
    // The table's header is written after its columns are measured and before its rows are read: fs__two ends in between.
    const r = await cli(['ledger', 'query', '--db', t.db, '--outcome', 'in_flight'], {
      onOut: () => {
        if (!finished) raw.prepare(`UPDATE audit SET outcome = 'unavailable' WHERE hub_name = 'fs__two'`).run();
        finished = true;
      },
    });
    raw.close();
    expect(r.code, r.err).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines.map((x) => x.match(/fs__\w+|unavailable|in_flight/g))).toEqual([
      null,
      ['fs__one', 'in_flight'],
      ['fs__two', 'unavailable'],
      ['fs__three', 'in_flight'],
    ]);
    // Its wider cell widened the column for it and the rows after it.
    expect(lines[3]!.indexOf('in_flight')).toBe(lines[2]!.indexOf('unavailable'));
  });

  // `tail -n abc` reached SQL as LIMIT NaN ("no such column: NaN", exit 1); yargs hands over
  // NaN for text, an array for an option given twice, and fractions and negatives as typed.
  it('numeric options take whole numbers up to the row limit only, filters one value each, else a usage error (exit 2) before the ledger is opened', async () => {
    const l = await seeded();
    const usage = (sub: string, err: string): Run => ({ out: '', err: `switchyard ledger ${sub}: ${err}\n`, code: 2 });
    const bad: [string[], string][] = [
      [['tail', '-n', 'abc'], '-n must be a whole number from 0 to 100000 (not a number)'],
      [['tail', '-n', '-1'], '-n must be a whole number from 0 to 100000 (not -1)'],
      [['tail', '-n', '1.5', '-f'], '-n must be a whole number from 0 to 100000 (not 1.5)'],
      [['tail', '-n', '1', '-n', '2'], '-n must be a whole number from 0 to 100000 (given more than once)'],
      [['tail', '-n', '100001'], '-n must be a whole number from 0 to 100000 (not 100001); `ledger export` gives every row'],
      [['query', '--limit', 'abc'], '--limit must be a whole number from 1 to 100000 (not a number)'],
      [['query', '--limit', '0'], '--limit must be a whole number from 1 to 100000 (not 0)'],
      [['query', '--limit', '2.5'], '--limit must be a whole number from 1 to 100000 (not 2.5)'],
      [['query', '--limit', '2', '--limit', '3'], '--limit must be a whole number from 1 to 100000 (given more than once)'],
      [['query', '--limit', '250000'], '--limit must be a whole number from 1 to 100000 (not 250000); `ledger export` gives every row'],
      [['query', '--since', '1h', '--since', '2h'], '--since must be given once'],
      // A text filter given twice was an array bound to one SQL parameter (a binding error, exit 1).
      [['query', '--server', 'a', '--server', 'b'], '--server must be given once'],
      [['tail', '--principal', 'a', '--principal', 'b'], '--principal must be given once'],
      [['stats', '--tool', 'a', '--tool', 'b'], '--tool must be given once'],
      [['export', '--outcome', 'ok', '--outcome', 'denied'], '--outcome must be given once'],
      [['prune', '--before', '1h', '--before', '2h'], '--before must be given once'],
      // An empty name matched no row, silently ("no rows match"), in every subcommand.
      [['query', '--tool', ''], '--tool is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['query', '--server', ''], '--server is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['tail', '--principal', ''], '--principal is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['stats', '--group', ''], '--group is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['export', '--method', ''], '--method is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['query', '--client', ''], '--client is empty: give a name, or leave the option out (an unset variable in a script?)'],
      [['keys', '--key', ''], '--key is empty: give an idempotency key, or leave the option out (an unset variable in a script?)'],
      [['keys', '--principal', ''], '--principal is empty: give a name, or leave the option out (an unset variable in a script?)'],
      // Both back from now, the wrong way round: a span no row can be in, read as "no rows match".
      [['query', '--since', '1h', '--until', '2h'], `--since (${new Date(NOW - 3_600_000).toISOString()}) is not before --until (${new Date(NOW - 7_200_000).toISOString()}): no row can be in between`],
      [['stats', '--since', '2026-01-01', '--until', '2026-01-01'], '--since (2026-01-01T00:00:00.000Z) is not before --until (2026-01-01T00:00:00.000Z): no row can be in between'],
    ];
    for (const [args, err] of bad) expect(await cli(['ledger', ...args, '--db', t.db]), args.join(' ')).toEqual(usage(args[0]!, err));
    // A usage error whatever the file: not "no ledger database".
    expect(await cli(['ledger', 'tail', '-n', 'abc', '--db', join(t.dir, 'none.db')])).toEqual(usage('tail', '-n must be a whole number from 0 to 100000 (not a number)'));
    // The largest limit is taken as given.
    expect((await cli(['ledger', 'query', '--limit', '100000', '--db', t.db, '--json'])).out.trimEnd().split('\n')).toHaveLength(7);
    // What is a whole number works: -n 0 prints only the header.
    expect((await cli(['ledger', 'tail', '-n', '0', '--db', t.db])).out.trimEnd().split('\n')).toHaveLength(1);
    expect((await cli(['ledger', 'tail', '-n', '2', '--db', t.db, '--json'])).out.trimEnd().split('\n')).toHaveLength(2);
    expect((await cli(['ledger', 'query', '--limit', '2', '--db', t.db, '--json'])).out.trimEnd().split('\n')).toHaveLength(2);
    // The reader binds the limit, and refuses one that is not a number.
    expect(() => l.query({ limit: Number.NaN })).toThrow(RangeError);
    expect(l.query({ limit: 2 })).toHaveLength(2);
  });

  // Date.parse read "2026-12-04" as UTC midnight but "2026-12-04T00:00" as local midnight.
  it('a date or time without an offset is UTC, as the ledger prints times, in any local zone', () => {
    const tz = process.env.TZ;
    process.env.TZ = 'America/New_York';
    try {
      expect(new Date(2026, 11, 4).getTimezoneOffset()).toBe(300); // the zone took effect
      for (const s of ['2026-12-04', '2026-12-04T00:00', '2026-12-04 00:00', '2026-12-04T00:00:00', '2026-12-04T00:00:00.000', '2026-12-04T00:00:00Z', '2026-12-03T19:00:00-05:00']) {
        expect(parseWhen(s, NOW), s).toBe(Date.UTC(2026, 11, 4));
      }
      expect(parseWhen('2026-12-04T01:00+0100', NOW)).toBe(Date.UTC(2026, 11, 4));
      // An hour-only offset (ISO 8601; PostgreSQL prints times so).
      expect(parseWhen('2026-12-04 01:00:00+01', NOW)).toBe(Date.UTC(2026, 11, 4));
      expect(parseWhen('2026-12-03T19:00-05', NOW)).toBe(Date.UTC(2026, 11, 4));
      // Shapes Date.parse guesses at, as local time (New York's midnight + 5 h): refused, not read as another instant.
      for (const s of ['2026-12-04 12:00 AM', '2026-12-04, 00:00', '2026-12-04 00:00 EST', '2026-12-04 Z']) {
        expect(() => parseWhen(s, NOW), s).toThrow(/not a time/);
      }
    } finally {
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });

  // Date.parse rolls a day past its month's end over: --since 2026-02-30 was taken as March 2.
  it('a time with digits past the millisecond keeps them: the rows of that millisecond fall on the right side', async () => {
    await seeded();
    // The row of mem__load, and its time as Python prints one (microseconds): 999 µs after it.
    const iso = new Date(NOW - 0.25 * 3_600_000).toISOString().replace('Z', '999Z');
    const tools = async (opt: string): Promise<string[]> =>
      (await cli(['ledger', 'query', '--json', '--db', t.db, opt, iso])).out.trimEnd().split('\n').map((l) => (JSON.parse(l) as { tool: string }).tool);
    expect(await tools('--until')).toContain('mem__load');
    expect(await tools('--since')).toEqual(['fs__slow']);
    expect(parseWhen('2026-12-04T00:00:00.5Z', NOW)).toBe(Date.UTC(2026, 11, 4) + 500);
  });

  it('a date that is no day of the calendar is refused (exit 2), not rolled over', async () => {
    for (const d of ['2026-02-30', '2026-04-31', '2026-02-29', '2100-02-29', '2026-13-01', '2026-00-10', '2026-01-00', '2026-02-30T12:00:00Z']) {
      expect(() => parseWhen(d, NOW), d).toThrow(/is no day of the calendar/);
    }
    expect(parseWhen('2024-02-29', NOW)).toBe(Date.UTC(2024, 1, 29));
    expect(parseWhen('2000-02-29T12:00:00Z', NOW)).toBe(Date.UTC(2000, 1, 29, 12));
    expect(parseWhen('2026-12-31T23:59:59Z', NOW)).toBe(Date.UTC(2026, 11, 31, 23, 59, 59));
    expect(parseWhen('90m', NOW)).toBe(NOW - 90 * 60_000);
    // A duration no Date can hold (400 digits are Infinity) would fail only after a prune ran.
    expect(() => parseWhen(`${'9'.repeat(400)}d`, NOW)).toThrow(/further back than a date can be/);
    expect(() => parseWhen('300000000d', NOW)).toThrow(/further back than a date can be/);

    await seeded();
    expect(await cli(['ledger', 'query', '--db', t.db, '--since', '2026-02-30'])).toMatchObject({ code: 2, out: '', err: expect.stringMatching(/not a date: "2026-02-30"/) });
    expect(await cli(['ledger', 'prune', '--db', t.db, '--before', '2026-02-30'])).toMatchObject({ code: 2, out: '' });
    expect(await cli(['ledger', 'prune', '--db', t.db, '--before', '300000000d'])).toMatchObject({ code: 2, out: '' });
    expect((await cli(['ledger', 'verify', '--db', t.db])).out).toMatch(/^ok: 6 rows verified/); // nothing pruned
  });

  it('finds the database from --config (relative to the config file) and reports problems', async () => {
    t = tempDir();
    mkdirSync(join(t.dir, 'etc'));
    writeFileSync(join(t.dir, 'etc', 'hub.config.json'), JSON.stringify({ ledger: { path: '../var/audit.db' } }));
    expect(resolveLedgerPath({ config: join(t.dir, 'etc', 'hub.config.json') })).toBe(join(t.dir, 'var', 'audit.db'));
    expect(resolveLedgerPath({ db: 'x.db', config: 'nope.json' })).toBe(resolve('x.db'));
    ledger = Ledger.open({ path: join(t.dir, 'var', 'audit.db') });
    await ledger.record(begin(), end());
    const r = await cli(['ledger', 'query', '--config', join(t.dir, 'etc', 'hub.config.json'), '--json']);
    expect(r.out.trimEnd().split('\n')).toHaveLength(1);
    // -c, as every other command takes it.
    expect(await cli(['ledger', 'query', '-c', join(t.dir, 'etc', 'hub.config.json'), '--json'])).toMatchObject({ code: 0, out: r.out });

    writeFileSync(join(t.dir, 'broken.json'), '{ nope');
    expect(await cli(['ledger', 'query', '--config', join(t.dir, 'broken.json')])).toMatchObject({ code: 2, err: expect.stringMatching(/^switchyard ledger query: cannot read/) });
    // A folder: its errno's code, as other commands say it, not Node's sentence.
    expect(await cli(['ledger', 'query', '--config', join(t.dir, 'etc')])).toMatchObject({ code: 2, err: `switchyard ledger query: cannot read ${join(t.dir, 'etc')} (EISDIR)\n` });
    // A broken config is located, never quoted: it may hold a literal secret.
    writeFileSync(join(t.dir, 'leaky.json'), '{ "servers": { "x": { "headers": { "authorization": Bearer sk-live-SECRET123 } } } }');
    const leaky = await cli(['ledger', 'query', '--config', join(t.dir, 'leaky.json')]);
    expect(leaky).toMatchObject({ code: 2, err: expect.stringMatching(/not valid JSON \(unexpected character 'B'\)/) });
    expect(leaky.err).not.toContain('SECRET');
    // ledger.path is completed from the environment as the hub does it; a missing variable is named.
    writeFileSync(join(t.dir, 'env.json'), JSON.stringify({ ledger: { path: '${env:SY_TEST_LEDGER_DIR}/audit.db' }, servers: { x: { command: 'x', env: { T: '${env:SY_TEST_UNSET_SECRET}' } } } }));
    process.env.SY_TEST_LEDGER_DIR = join(t.dir, 'var');
    try {
      expect(resolveLedgerPath({ config: join(t.dir, 'env.json') })).toBe(join(t.dir, 'var', 'audit.db'));
    } finally {
      delete process.env.SY_TEST_LEDGER_DIR;
    }
    expect(() => resolveLedgerPath({ config: join(t.dir, 'env.json') })).toThrow(/SY_TEST_LEDGER_DIR is not set/);
    expect(await cli(['ledger', 'query', '--config', join(t.dir, 'missing.json')])).toMatchObject({ code: 2, err: `switchyard ledger query: ${join(t.dir, 'missing.json')}: no such config file: give the config whose ledger.path names the ledger, or the ledger itself with --db\n` });
    expect(await cli(['ledger', 'query', '--db', join(t.dir, 'none.db')])).toMatchObject({ code: 1, err: `switchyard ledger query: no ledger database at ${join(t.dir, 'none.db')}\n` });
    // The config's ledger not made yet (a first run): what makes it, in the same line.
    writeFileSync(join(t.dir, 'unstarted.json'), JSON.stringify({ ledger: { path: 'never/ledger.db' }, servers: {} }));
    expect(await cli(['ledger', 'stats', '--config', join(t.dir, 'unstarted.json')])).toMatchObject({
      code: 1,
      err: `switchyard ledger stats: no ledger database at ${join(t.dir, 'never', 'ledger.db')} (ledger.path): the hub makes it when it starts, or give one with --db\n`,
    });
    // A ledger.path that is no path (a list, a number, ""): the default ledger beside the config
    // was read instead, and pruned, said to be ledger.path's; another ledger than the config names.
    mkdirSync(join(t.dir, 'typo', 'data'), { recursive: true });
    const other = Ledger.open({ path: join(t.dir, 'typo', 'data', 'ledger.db') });
    await other.record(begin({ ts: NOW - 48 * 3_600_000 }), end());
    await other.close();
    for (const path of [['../var/audit.db'], 7, '']) {
      writeFileSync(join(t.dir, 'typo', 'hub.config.json'), JSON.stringify({ ledger: { path }, servers: {} }));
      for (const args of [['query'], ['prune', '--before', '1d']])
        expect(await cli(['ledger', ...args, '--config', join(t.dir, 'typo', 'hub.config.json')]), JSON.stringify(path)).toEqual({
          code: 2,
          out: '',
          err: `switchyard ledger ${args[0]}: ${join(t.dir, 'typo', 'hub.config.json')}: ledger.path must be a path (a string, not empty): give the ledger's, or the ledger itself with --db\n`,
        });
    }
    expect((await cli(['ledger', 'query', '--db', join(t.dir, 'typo', 'data', 'ledger.db'), '--json'])).out.trimEnd().split('\n')).toHaveLength(1); // not pruned
    // A config with the ledger off: no start makes it, so that is what is said.
    writeFileSync(join(t.dir, 'off.json'), JSON.stringify({ ledger: { enabled: false }, servers: {} }));
    expect(await cli(['ledger', 'query', '--config', join(t.dir, 'off.json')])).toMatchObject({
      code: 1,
      err: `switchyard ledger query: no ledger database at ${join(t.dir, 'data', 'ledger.db')} (ledger.path): the config has ledger.enabled false, so its hub keeps none, or give one with --db\n`,
    });
    expect(existsSync(join(t.dir, 'none.db'))).toBe(false); // reading never creates a file
    expect(await cli(['ledger', 'query', '--db', join(t.dir, 'var', 'audit.db'), '--since', 'yesterday'])).toMatchObject({
      code: 2,
      err: expect.stringMatching(/not a time: "yesterday"/),
    });
  });

  it('runs as a real process from the compiled module (exit codes, stdout)', async () => {
    const dist = resolve('dist/src/cli/ledger.js');
    expect(existsSync(dist), 'dist is built by the global setup (npx tsc -p .)').toBe(true);
    const l = await seeded();
    const entry = `
      import yargs from 'yargs';
      const { ledgerCommand } = await import(${JSON.stringify(pathToFileURL(dist).href)});
      // With -e the arguments start at argv[1].
      await yargs(process.argv.slice(1)).scriptName('switchyard').command(ledgerCommand).demandCommand(1).strict().help().parseAsync();`;
    // Each run a node process of its own (yargs and the ledger modules loaded, half a second of
    // CPU): those that do not need the tampered row run side by side, before it is tampered.
    const run = (...args: string[]): Promise<{ status: number | null; stdout: string; stderr: string }> =>
      new Promise((done, fail) => {
        const p = spawn(process.execPath, ['--input-type=module', '-e', entry, '--', ...args], { cwd: resolve('.'), stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        p.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
        p.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
        p.once('error', fail);
        p.once('close', (status) => done({ status, stdout, stderr }));
      });
    const [q, verified, missing, typo, tail, since, bare] = await Promise.all([
      run('ledger', 'query', '--db', t.db, '--json', '--outcome', 'timeout'),
      run('ledger', 'verify', '--db', t.db),
      run('ledger', 'query', '--db', join(t.dir, 'nope.db')),
      run('ledger', 'prune', '--before', '1d', '--db', join(t.dir, 'typo', 'x.db')),
      run('ledger', 'tail', '-n', 'abc', '--db', t.db),
      run('ledger', 'query', '--since', '2026-02-30', '--db', t.db),
      run('ledger'),
    ]);
    expect(q.status).toBe(0);
    expect(JSON.parse(q.stdout)).toMatchObject({ tool: 'mem__store', outcome: 'timeout' });
    expect(verified).toMatchObject({ status: 0, stdout: expect.stringMatching(/^ok: 6 rows verified \(chain seq 1\.\.6\)\nhead: 6:[0-9a-f]{64}\n$/) });
    const id = l.query({ outcome: 'timeout' })[0].id;
    const raw = new Database(t.db);
    raw.prepare('DELETE FROM audit WHERE id = ?').run(id);
    raw.close();
    const v = await run('ledger', 'verify', '--db', t.db);
    expect(v.status).toBe(1);
    expect(v.stdout).toMatch(/^FAILED at row \d+ \(seq 5\): chain broken before this row: expected seq 4, found 5/);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/switchyard ledger query: no ledger database at/);
    expect(typo).toMatchObject({ status: 1, stdout: '', stderr: expect.stringMatching(/no ledger database at/) });
    expect(existsSync(join(t.dir, 'typo'))).toBe(false);
    expect(tail).toMatchObject({ status: 2, stdout: '', stderr: 'switchyard ledger tail: -n must be a whole number from 0 to 100000 (not a number)\n' });
    expect(since).toMatchObject({ status: 2, stdout: '', stderr: expect.stringMatching(/not a date/) });
    expect(bare.status).not.toBe(0); // a subcommand is required
  }, 60_000);
});

describe('switchyard ledger keys', () => {
  // A key left unknown (the hub stopped during its call) is refused to a retry; only the table
  // said so, which no command read: `ledger query` shows the call's row, not the key's state.
  it('lists each key with its state and what a retry with it gets, never its kept answer; filters by principal, key and state', async () => {
    await seeded();
    const db = new Database(t.db);
    const put = db.prepare('INSERT INTO idempotency (principal, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    put.run('alice', 'k-done', 'fs__write', 'ab', 'done', JSON.stringify({ result: { content: [{ type: 'text', text: 'SECRET-ANSWER' }] } }), NOW - 3_000, NOW - 2_000);
    put.run('alice', 'k-lost', 'fs__write', 'ab', 'unknown', null, NOW - 1_500, NOW - 1_000);
    put.run('bob', 'k-run', 'mem__store', 'cd', 'in_flight', null, NOW - 500, null);
    // The same key of alice's through a tool group's endpoint is another key (keys are per endpoint).
    db.prepare(`INSERT INTO idempotency (principal, tool_group, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES ('alice', 'small', 'k-done', 'fs__write', 'ab', 'done', '{"result":{}}', ?, ?)`).run(NOW - 5_000, NOW - 4_000);
    db.close();
    const all = await cli(['ledger', '--db', t.db, 'keys']);
    expect(all.code, all.err).toBe(0);
    const lines = all.out.trim().split('\n');
    expect(lines[0]).toMatch(/^principal\s+group\s+key\s+tool\s+state\s+created\s+ended\s+a retry with it$/);
    expect(lines.slice(1).map((l) => l.split(/\s{2,}/).slice(0, 5))).toEqual([
      ['bob', '-', 'k-run', 'mem__store', 'in_flight'],
      ['alice', '-', 'k-lost', 'fs__write', 'unknown'],
      ['alice', '-', 'k-done', 'fs__write', 'done'],
      ['alice', 'small', 'k-done', 'fs__write', 'done'],
    ]);
    expect(lines[2]).toContain('is refused: the call may have run; check its effect, then use a new key');
    expect(all.out).not.toContain('SECRET-ANSWER');
    const lost = await cli(['ledger', '--db', t.db, 'keys', '--state', 'unknown', '--json']);
    expect(lost.out.trim().split('\n').map((l) => JSON.parse(l))).toEqual([
      { principal: 'alice', group: null, key: 'k-lost', tool: 'fs__write', state: 'unknown', created: new Date(NOW - 1_500).toISOString(), ended: new Date(NOW - 1_000).toISOString(), expired: false },
    ]);
    expect((await cli(['ledger', '--db', t.db, 'keys', '--principal', 'bob', '--json'])).out).toContain('"k-run"');
    const none = await cli(['ledger', '--db', t.db, 'keys', '--key', 'nope']);
    expect([none.code, none.out, none.err]).toEqual([0, '', 'switchyard ledger keys: note: no idempotency keys match\n']);
    const bad = await cli(['ledger', '--db', t.db, 'keys', '--state', 'lost']).catch((e: Error) => ({ code: 2, err: e.message }));
    expect(bad.err).toMatch(/Choices|lost/);
  });

  // Up to 100,000 keys were read, then made into one string, and written at once: over 300 MB
  // with long keys before the first line reached a pipe.
  it('writes the keys as it reads them, a page at a time, each write waited for, holding no read open; table as table() would', async () => {
    t = tempDir();
    Ledger.open({ path: t.db }).close();
    const raw = new Database(t.db);
    const put = raw.prepare('INSERT INTO idempotency (principal, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    raw.transaction(() => {
      for (let i = 0; i < 1200; i++) put.run('alice', `k${i}`, 'fs__write', 'ab', 'done', null, NOW - 5000 + i, NOW - 5000 + i);
    })();
    put.run('bob', 'k-run', 'mem__store', 'cd', 'in_flight', null, NOW - 10_000, null);
    const finish = raw.prepare(`UPDATE idempotency SET state = ?, completed_ms = ? WHERE key = 'k-run'`);
    for (const json of [true, false]) {
      finish.run('in_flight', null);
      let writes = 0;
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const run = cli(['ledger', '--db', t.db, 'keys', '--limit', '1300', ...(json ? ['--json'] : [])], { onOut: () => (++writes === 1 ? held : undefined) });
      await until(() => writes, (n) => n > 0, 5000);
      await new Promise((r) => setTimeout(r, 50));
      // A pipe's slow reader: nothing more is produced until it takes more.
      expect(writes).toBe(1);
      // And no snapshot is kept meanwhile: the hub's WAL can be rewound; a key that ends now is
      // listed as it is when its page is read, in the place it had when the command began (the
      // table's columns were measured before, in a pass of their own: only JSON lines here).
      if (json) finish.run('done', NOW);
      else raw.prepare(`UPDATE idempotency SET tool = tool WHERE key = 'k0'`).run();
      expect((raw.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[])[0].busy).toBe(0);
      release();
      const r = await run;
      expect(r.code, r.err).toBe(0);
      expect(writes).toBeGreaterThan(1);
      const keys = [...Array.from({ length: 1200 }, (_, i) => `k${1199 - i}`), 'k-run'];
      if (json) {
        const lines = r.out.trimEnd().split('\n').map((l) => JSON.parse(l) as { key: string; state: string });
        expect(lines.map((k) => k.key)).toEqual(keys);
        expect(lines.at(-1)).toMatchObject({ key: 'k-run', state: 'done', ended: new Date(NOW).toISOString() });
      } else {
        const rows = keys.map((k, i): KeyRow => (k === 'k-run' ? { principal: 'bob', group: null, key: k, tool: 'mem__store', state: 'in_flight', createdMs: NOW - 10_000, completedMs: null } : { principal: 'alice', group: null, key: k, tool: 'fs__write', state: 'done', createdMs: NOW - 3801 - i, completedMs: NOW - 3801 - i }));
        expect(r.out).toBe(table(KEY_HEADER, rows.map((k) => keyCells(k, NOW - DEFAULT_KEY_TTL_MS))));
        expect(r.err).toBe('');
      }
    }
    raw.close();
  });

  // A key past ledger.idempotencyTtl (from its call's end) counts as absent: a retry with it runs
  // the call as new (idempotency.ts lookup), though the hub purges it only hourly. Listed as
  // 'done' (replayed) or 'unknown' (refused), an operator was told the opposite of what happens.
  // Keys kept before they were scoped to endpoints (0016) are read from every endpoint: `*`,
  // in a ledger read as an older Switchyard left it and once a hub has upgraded it alike.
  it('shows a key kept before keys were scoped to endpoints as of every endpoint (*), before and after the upgrade', async () => {
    t = tempDir();
    const raw = new Database(t.db);
    migrate(raw, loadMigrations().slice(0, 15));
    raw.prepare(`INSERT INTO idempotency (principal, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES ('alice', 'k-old', 'fs__write', 'ab', 'done', '{"result":{}}', ?, ?)`).run(NOW - 2_000, NOW - 1_000);
    raw.close();
    const groupOf = async () => (JSON.parse((await cli(['ledger', '--db', t.db, 'keys', '--json'])).out) as { group: unknown }).group;
    expect(await groupOf()).toBe('*');
    await Ledger.open({ path: t.db }).close();
    expect(await groupOf()).toBe('*');
  });

  it('says a key past ledger.idempotencyTtl is expired: a retry with it runs the call as new, neither replayed nor refused', async () => {
    await seeded();
    const db = new Database(t.db);
    const put = db.prepare('INSERT INTO idempotency (principal, key, tool, args_hash, state, answer_json, created_ms, completed_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)');
    const H = 3_600_000;
    put.run('alice', 'k-old-done', 'fs__write', 'ab', 'done', '{"result":{}}', NOW - 26 * H, NOW - 25 * H);
    put.run('alice', 'k-old-lost', 'fs__write', 'ab', 'unknown', null, NOW - 26 * H, NOW - 25 * H);
    put.run('alice', 'k-2h', 'fs__write', 'ab', 'unknown', null, NOW - 3 * H, NOW - 2 * H);
    db.close();
    // No config: the default TTL, 24h.
    const byDefault = await cli(['ledger', '--db', t.db, 'keys', '--json']);
    expect(byDefault.out.trim().split('\n').map((l) => JSON.parse(l) as { key: string; expired: boolean }).map((k) => [k.key, k.expired])).toEqual([
      ['k-2h', false],
      ['k-old-done', true],
      ['k-old-lost', true],
    ]);
    const table = (await cli(['ledger', '--db', t.db, 'keys'])).out.trim().split('\n');
    expect(table[2]).toMatch(/k-old-done .*runs the call as new: the key expired/);
    expect(table[3]).toMatch(/k-old-lost .*runs the call as new: the key expired/);
    expect(table.slice(2).join('\n')).not.toMatch(/is refused|kept answer/);
    // The config's ledger.idempotencyTtl (1h): the key of 2 hours ago is expired too.
    const cfg = join(t.dir, 'ttl.config.json');
    writeFileSync(cfg, JSON.stringify({ ledger: { path: t.db, idempotencyTtl: '1h' } }));
    const short = await cli(['ledger', '--config', cfg, 'keys', '--key', 'k-2h', '--json']);
    expect(short.err).toBe('');
    expect(JSON.parse(short.out)).toMatchObject({ key: 'k-2h', state: 'unknown', expired: true });
  });
});
