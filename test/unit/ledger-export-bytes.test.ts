import Database from 'better-sqlite3';
import yargs from 'yargs';
import { afterEach, describe, expect, it } from 'vitest';
import { makeLedgerCommand } from '../../src/cli/ledger.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { LedgerReader } from '../../src/ledger/reader.js';
import { AUDIT_COLUMNS, auditRowOf, type AuditDbRow, type AuditRow } from '../../src/ledger/rows.js';
import type { ErrorKind, Outcome } from '../../src/ledger/types.js';
import { tempDir } from './ledger-helpers.js';
import { runLedgerCommand, type LedgerRun } from '../helpers/ledger-command.js';

let t: ReturnType<typeof tempDir> | undefined;
afterEach(() => {
  t?.cleanup();
  t = undefined;
});

/**
 * A row read as an object, column by name: what the reads mapped before they read arrays, kept
 * here as the reference auditRowOf's positions are checked against.
 */
function byName(r: AuditDbRow): AuditRow {
  return {
    id: r.id,
    seq: r.seq,
    ts: r.ts,
    requestId: r.request_id,
    principal: r.principal,
    group: r.tool_group ?? null,
    clientAddress: r.client_address,
    clientEra: r.client_era,
    clientName: r.client_name,
    clientVersion: r.client_version,
    method: r.method,
    hubName: r.hub_name,
    server: r.server,
    upstreamName: r.upstream_name,
    upstreamEra: r.upstream_era,
    outcome: r.outcome as Outcome,
    errorKind: r.error_kind as ErrorKind,
    errorCode: r.error_code,
    errorMessage: r.error_message,
    latencyMs: r.latency_ms,
    requestBytes: r.request_bytes,
    responseBytes: r.response_bytes,
    idempotencyKey: r.idempotency_key,
    argsHash: r.args_hash,
    argsJson: r.args_json,
    resultJson: r.result_json,
    hash: r.hash,
    traceId: r.trace_id ?? null,
    spanId: r.span_id ?? null,
    parentSpanId: r.parent_span_id ?? null,
  };
}

/** `ledger export` through yargs in this process: its output as the bytes it wrote, and its exit code. */
function exported(db: string, ...more: string[]): Promise<LedgerRun> {
  return runLedgerCommand(['ledger', 'export', '--db', db, ...more]);
}

const H = (c: string): string => c.repeat(64);
const COLUMNS = AUDIT_COLUMNS.join(', ');

/**
 * Rows with every column set, and with each one null; text a terminal or a spreadsheet must not
 * take as it is (controls, bidi overrides, zero-width and astral characters, formula starts,
 * quotes, commas, newlines); numbers JSON and CSV write differently (past 2^53, an exponent, a
 * fraction, the infinity REAL can hold); request ids of each type (a number, a string of digits,
 * one cut to its start, the hub's own row); bodies redacted, reordered by a parse, and not JSON;
 * a column holding another type than its own (a row changed by hand).
 */
const ROWS: unknown[][] = [
  [1, 1, 1_800_000_000_000, '7', 'alice', '127.0.0.1', '2026-07-28', 'cursor', '1.2.3', 'tools/call', 'fs__read', 'fs', 'read', '2025-11-25', 'ok', null, null, null, 12.5, 120, 2048, 'key-1', H('a'), '{"path":"/tmp/x","token":"[redacted]"}', '{"content":[{"type":"text","text":"héllo ☃ 😀"}],"isError":false}', H('b'), 'small', H('1').slice(0, 32), H('2').slice(0, 16), H('3').slice(0, 16)],
  [2, null, 1_800_000_000_001, '', 'bob', null, '2025-11-25', null, null, 'tools/list', null, null, null, null, 'in_flight', null, null, null, null, null, null, null, null, null, null, null, null, null, null, null],
  [3, 2, 1_800_000_060_999, '"7"', '=cmd|" /C calc"!A0', '::1', '2026-07-28', '+client, "quoted"', '-1', '@method', 'fs__write\u200b', 'fs\u202egnp.exe', 'write\u0000\u001b[31m', null, 'rpc_error', 'upstream', -32602, 'line one\nline two\r\n\ttabbed \u0085 \u007f 名前 \u{E0041}', 1e21, 9007199254740993, -0, null, '', 'not json {', '{"2":"b","1":"a","z":[1.50,2e3]}', H('c'), null, null, null, null],
  [4, 3, 1_800_000_120_000, '"abc"…', 'hub', null, '2026-07-28', null, null, 'catalog/drop', 'f__echo', 'f', null, null, 'replayed', 'kept', 0, '', Infinity, 0, 1, '\t@lead', '-', 'null', '"text"', 'not a hash, changed by hand', null, null, null, null],
  [5, 4, 1_800_000_180_000, '-12.5e3', 'carol', null, '2026-07-28', null, null, 'tools/call', 'x', 'x', null, null, 'ok', null, null, null, 'fast', 33.333333333333336, 0.1, null, null, '{"password":"[redacted]","n":12345678901234567890}', null, H('d'), null, null, null, null],
];

function fill(path: string): void {
  Ledger.open({ path }).close(); // the schema as shipped
  const db = new Database(path);
  const ins = db.prepare(`INSERT INTO audit (${COLUMNS}) VALUES (${AUDIT_COLUMNS.map(() => '?').join(', ')})`);
  for (const r of ROWS) ins.run(...r);
  db.close();
}

/** What `ledger export` wrote of ROWS before its lines were built and written faster: each byte of it. */
const JSONL = [
  "{\"id\":1,\"seq\":1,\"ts\":\"2027-01-15T08:00:00.000Z\",\"requestId\":7,\"requestIdType\":\"number\",\"requestIdCut\":false,\"principal\":\"alice\",\"group\":\"small\",\"clientAddress\":\"127.0.0.1\",\"clientEra\":\"2026-07-28\",\"clientName\":\"cursor\",\"clientVersion\":\"1.2.3\",\"method\":\"tools/call\",\"server\":\"fs\",\"tool\":\"fs__read\",\"upstreamName\":\"read\",\"upstreamEra\":\"2025-11-25\",\"outcome\":\"ok\",\"errorKind\":null,\"errorCode\":null,\"errorMessage\":null,\"latencyMs\":12.5,\"requestBytes\":120,\"responseBytes\":2048,\"idempotencyKey\":\"key-1\",\"argsHash\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\",\"traceId\":\"11111111111111111111111111111111\",\"spanId\":\"2222222222222222\",\"parentSpanId\":\"3333333333333333\",\"args\":{\"path\":\"/tmp/x\",\"token\":\"[redacted]\"},\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"héllo ☃ 😀\"}],\"isError\":false},\"hash\":\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"}",
  "{\"id\":2,\"seq\":null,\"ts\":\"2027-01-15T08:00:00.001Z\",\"requestId\":\"\",\"requestIdType\":null,\"requestIdCut\":false,\"principal\":\"bob\",\"group\":null,\"clientAddress\":null,\"clientEra\":\"2025-11-25\",\"clientName\":null,\"clientVersion\":null,\"method\":\"tools/list\",\"server\":null,\"tool\":null,\"upstreamName\":null,\"upstreamEra\":null,\"outcome\":\"in_flight\",\"errorKind\":null,\"errorCode\":null,\"errorMessage\":null,\"latencyMs\":null,\"requestBytes\":null,\"responseBytes\":null,\"idempotencyKey\":null,\"argsHash\":null,\"traceId\":null,\"spanId\":null,\"parentSpanId\":null,\"args\":null,\"result\":null,\"hash\":null}",
  "{\"id\":3,\"seq\":2,\"ts\":\"2027-01-15T08:01:00.999Z\",\"requestId\":\"7\",\"requestIdType\":\"string\",\"requestIdCut\":false,\"principal\":\"=cmd|\\\" /C calc\\\"!A0\",\"group\":null,\"clientAddress\":\"::1\",\"clientEra\":\"2026-07-28\",\"clientName\":\"+client, \\\"quoted\\\"\",\"clientVersion\":\"-1\",\"method\":\"@method\",\"server\":\"fs\\u202egnp.exe\",\"tool\":\"fs__write\\u200b\",\"upstreamName\":\"write\\u0000\\u001b[31m\",\"upstreamEra\":null,\"outcome\":\"rpc_error\",\"errorKind\":\"upstream\",\"errorCode\":-32602,\"errorMessage\":\"line one\\nline two\\r\\n\\ttabbed \\u0085 \\u007f 名前 \\udb40\\udc41\",\"latencyMs\":1e+21,\"requestBytes\":9007199254740992,\"responseBytes\":0,\"idempotencyKey\":null,\"argsHash\":\"\",\"traceId\":null,\"spanId\":null,\"parentSpanId\":null,\"args\":\"not json {\",\"result\":{\"1\":\"a\",\"2\":\"b\",\"z\":[1.5,2000]},\"hash\":\"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"}",
  "{\"id\":4,\"seq\":3,\"ts\":\"2027-01-15T08:02:00.000Z\",\"requestId\":\"abc\",\"requestIdType\":null,\"requestIdCut\":true,\"principal\":\"hub\",\"group\":null,\"clientAddress\":null,\"clientEra\":\"2026-07-28\",\"clientName\":null,\"clientVersion\":null,\"method\":\"catalog/drop\",\"server\":\"f\",\"tool\":\"f__echo\",\"upstreamName\":null,\"upstreamEra\":null,\"outcome\":\"replayed\",\"errorKind\":\"kept\",\"errorCode\":0,\"errorMessage\":\"\",\"latencyMs\":null,\"requestBytes\":0,\"responseBytes\":1,\"idempotencyKey\":\"\\t@lead\",\"argsHash\":\"-\",\"traceId\":null,\"spanId\":null,\"parentSpanId\":null,\"args\":null,\"result\":\"text\",\"hash\":\"not a hash, changed by hand\"}",
  "{\"id\":5,\"seq\":4,\"ts\":\"2027-01-15T08:03:00.000Z\",\"requestId\":\"-12.5e3\",\"requestIdType\":\"number\",\"requestIdCut\":false,\"principal\":\"carol\",\"group\":null,\"clientAddress\":null,\"clientEra\":\"2026-07-28\",\"clientName\":null,\"clientVersion\":null,\"method\":\"tools/call\",\"server\":\"x\",\"tool\":\"x\",\"upstreamName\":null,\"upstreamEra\":null,\"outcome\":\"ok\",\"errorKind\":null,\"errorCode\":null,\"errorMessage\":null,\"latencyMs\":\"fast\",\"requestBytes\":33.333333333333336,\"responseBytes\":0.1,\"idempotencyKey\":null,\"argsHash\":null,\"traceId\":null,\"spanId\":null,\"parentSpanId\":null,\"args\":{\"password\":\"[redacted]\",\"n\":12345678901234567000},\"result\":null,\"hash\":\"dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\"}",
];

// Row 3's error message holds newlines, in its quoted cell: three lines here.
const CSV = [
  "id,seq,ts,requestId,requestIdType,requestIdCut,principal,group,clientAddress,clientEra,clientName,clientVersion,method,server,tool,upstreamName,upstreamEra,outcome,errorKind,errorCode,errorMessage,latencyMs,requestBytes,responseBytes,idempotencyKey,argsHash,traceId,spanId,parentSpanId,args,result,hash",
  "1,1,2027-01-15T08:00:00.000Z,7,number,false,alice,small,127.0.0.1,2026-07-28,cursor,1.2.3,tools/call,fs,fs__read,read,2025-11-25,ok,,,,12.5,120,2048,key-1,aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa,11111111111111111111111111111111,2222222222222222,3333333333333333,\"{\"\"path\"\":\"\"/tmp/x\"\",\"\"token\"\":\"\"[redacted]\"\"}\",\"{\"\"content\"\":[{\"\"type\"\":\"\"text\"\",\"\"text\"\":\"\"héllo ☃ 😀\"\"}],\"\"isError\"\":false}\",bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
  "2,,2027-01-15T08:00:00.001Z,,,false,bob,,,2025-11-25,,,tools/list,,,,,in_flight,,,,,,,,,,,,,,",
  "3,2,2027-01-15T08:01:00.999Z,7,string,false,\"'=cmd|\"\" /C calc\"\"!A0\",,::1,2026-07-28,\"'+client, \"\"quoted\"\"\",'-1,'@method,fs?gnp.exe,fs__write?,write??[31m,,rpc_error,upstream,-32602,\"line one",
  "line two?",
  "\ttabbed ? ? 名前 ?\",1e+21,9007199254740992,0,,,,,,not json {,\"{\"\"1\"\":\"\"a\"\",\"\"2\"\":\"\"b\"\",\"\"z\"\":[1.5,2000]}\",cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
  "4,3,2027-01-15T08:02:00.000Z,abc,,true,hub,,,2026-07-28,,,catalog/drop,f,f__echo,,,replayed,kept,0,,Infinity,0,1,'\t@lead,'-,,,,,text,\"not a hash, changed by hand\"",
  "5,4,2027-01-15T08:03:00.000Z,'-12.5e3,number,false,carol,,,2026-07-28,,,tools/call,x,x,,,ok,,,,fast,33.333333333333336,0.1,,,,,,\"{\"\"password\"\":\"\"[redacted]\"\",\"\"n\"\":12345678901234567000}\",,dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd",
];


describe('ledger export, byte for byte', () => {
  it('reads a page of rows as arrays into the same rows as one of objects', () => {
    t = tempDir();
    fill(t.db);
    const reader = LedgerReader.open({ path: t.db });
    try {
      const objects = (reader.db.prepare('SELECT * FROM audit ORDER BY id').all() as AuditDbRow[]).map(byName);
      const arrays = (reader.db.prepare(`SELECT ${COLUMNS} FROM audit ORDER BY id`).raw().all() as unknown[][]).map(auditRowOf);
      expect(arrays).toEqual(objects);
      // Key for key, in the same order (a row's JSON in /admin/ledger is written as it is).
      expect(arrays.map((r) => JSON.stringify(r))).toEqual(objects.map((r) => JSON.stringify(r)));
      expect([...reader.pages()].flat()).toEqual(objects);
    } finally {
      reader.close();
    }
  });

  it('writes these rows as JSON lines and as CSV, to the byte', async () => {
    t = tempDir();
    fill(t.db);
    const jsonl = await exported(t.db);
    expect(jsonl.code).toBe(0);
    expect(jsonl.bytes.toString()).toBe(JSONL.join('\n') + '\n');
    // Bytes, not only text: UTF-8 of the text, with no character cut between two writes.
    expect(jsonl.bytes.equals(Buffer.from(JSONL.join('\n') + '\n'))).toBe(true);
    const csv = await exported(t.db, '--format', 'csv');
    expect(csv.code).toBe(0);
    expect(csv.bytes.toString()).toBe(CSV.join('\n') + '\n');
    expect(csv.bytes.equals(Buffer.from(CSV.join('\n') + '\n'))).toBe(true);
  });

  it('writes the same bytes in writes of at most 64 KiB, a row of large bodies in one of its own', async () => {
    t = tempDir();
    fill(t.db);
    const db = new Database(t.db);
    // Past Latin-1 (two bytes a character in V8), so the chunks' room is counted in UTF-8's bytes.
    const big = JSON.stringify({ text: '☃'.repeat(30_000) });
    const ins = db.prepare(`INSERT INTO audit (${COLUMNS}) VALUES (${AUDIT_COLUMNS.map(() => '?').join(', ')})`);
    const row = (id: number, args: string | null): unknown[] => [id, id, 1_800_000_240_000 + id, String(id), 'dave', null, '2026-07-28', null, null, 'tools/call', 'x', 'x', null, null, 'ok', null, null, `é ${id}`, 1, 1, 1, null, null, args, null, H('e'), null, null, null, null];
    db.transaction(() => {
      for (let id = 10; id < 400; id++) ins.run(...row(id, id === 200 ? big : null));
    })();
    db.close();
    const writes: Buffer[] = [];
    const cmd = makeLedgerCommand({ out: (s) => void writes.push(Buffer.from(s)), err: () => undefined, setExitCode: () => undefined });
    await yargs(['ledger', 'export', '--db', t.db]).command(cmd).strict().exitProcess(false).parseAsync();
    const lines = Buffer.concat(writes).toString().split('\n');
    expect(lines.slice(0, JSONL.length)).toEqual(JSONL);
    expect(lines).toHaveLength(JSONL.length + 390 + 1);
    expect(JSON.parse(lines[JSONL.length + 190]!)).toMatchObject({ id: 200, args: { text: '☃'.repeat(30_000) }, errorMessage: 'é 200' });
    // Whole lines a write, none over 64 KiB but the big row's own.
    for (const w of writes) expect(w.at(-1)).toBe(0x0a);
    const over = writes.filter((w) => w.length > 1 << 16);
    expect(over.map((w) => JSON.parse(w.toString()).id)).toEqual([200]);
    expect(writes.length).toBeGreaterThan(2);
  });
});
