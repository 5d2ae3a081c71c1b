/**
 * Requests refused before their body is read still reached the hub, so each gets its ledger
 * row: not authenticated (401), too large (413), not JSON (415). Unauthenticated ones can come
 * from anyone who reaches the port, so their rows are throttled per address, and what is over
 * is counted in the log. A real hub with API keys, over loopback HTTP.
 */
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, rawHttp } from '../helpers/wire.js';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { SDK2, waitForRows } from './ledger-helpers.js';

const ALICE_KEY = 'sy_alice-unread-key-0123456789abcdefghijklmnopqrst';
const WRONG_KEY = 'sy_wrong-unread-key-0123456789abcdefghijklmnopqrst';
const MAX_BODY = 4096;

let hub: HubProcess;
let db: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-unread-'));
  db = join(dir, 'ledger.db');
  hub = await startHub(
    {
      auth: { apiKeys: [{ principal: 'alice', sha256: sha256Hex(ALICE_KEY) }] },
      listen: { maxBodyBytes: MAX_BODY },
      servers: { modern: nodeServer(SDK2) },
    },
    { dir },
  );
  await waitForReadyWith(hub.url, ['modern'], ALICE_KEY);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  for (const s of [ALICE_KEY, WRONG_KEY]) expect(hub.logs.join('\n')).not.toContain(s);
});

interface UnreadRow {
  principal: string;
  method: string;
  client_era: string;
  outcome: string;
  error_code: number;
  error_message: string;
  request_bytes: number | null;
}

/** Rows of requests refused unread, straight from SQLite (every column the test names). */
async function unreadRows(where: string, atLeast = 1, ownWhere = false): Promise<UnreadRow[]> {
  if (!ownWhere) await waitForRows(db, { outcome: 'denied' }, (r) => r.length >= atLeast);
  for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 50))) {
    const d = new Database(db, { readonly: true });
    try {
      const rows = d.prepare(`SELECT principal, method, client_era, outcome, error_code, error_message, request_bytes FROM audit WHERE ${where} ORDER BY id`).all() as UnreadRow[];
      // `ownWhere`: polled until `where` itself finds `atLeast` rows (no CLI run per poll).
      if (!ownWhere || rows.length >= atLeast || Date.now() > end) return rows;
    } finally {
      d.close();
    }
  }
}

describe('rows for requests refused before their body is read', () => {
  it('415: the principal, the method a modern header names, the status as the code', async () => {
    const body = JSON.stringify(modernBody(1, 'tools/list'));
    const r = await post(hub.url, body, { ...modernHeaders('tools/list'), 'content-type': 'text/plain', authorization: `Bearer ${ALICE_KEY}` });
    expect(r.status).toBe(415);
    const rows = await unreadRows('error_code = 415');
    expect(rows).toEqual([
      { principal: 'alice', method: 'tools/list', client_era: '2026-07-28', outcome: 'denied', error_code: 415, error_message: expect.stringContaining('Unsupported Media Type'), request_bytes: Buffer.byteLength(body) },
    ]);
  });

  it('415 for a compressed body: recorded as the wrong Content-Type is, its message naming why', async () => {
    const body = JSON.stringify(modernBody(3, 'tools/list'));
    const r = await post(hub.url, body, { ...modernHeaders('tools/list'), 'content-encoding': 'gzip', authorization: `Bearer ${ALICE_KEY}` });
    expect(r.status).toBe(415);
    const rows = await unreadRows(`error_code = 415 AND error_message LIKE '%uncompressed%'`, 1, true);
    expect(rows).toEqual([{ principal: 'alice', method: 'tools/list', client_era: '2026-07-28', outcome: 'denied', error_code: 415, error_message: expect.stringContaining('Content-Encoding'), request_bytes: Buffer.byteLength(body) }]);
  });

  it('413: without a method header, under (unread); a chunked body has no size to record', async () => {
    const big = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: { pad: 'x'.repeat(MAX_BODY * 2) } });
    const r = await rawHttp(hub.url, {
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${ALICE_KEY}`, 'transfer-encoding': 'chunked' },
      chunks: [big.slice(0, 1000), big.slice(1000)],
    });
    expect(r.status).toBe(413);
    const rows = await unreadRows('error_code = 413', 2);
    expect(rows).toEqual([
      { principal: 'alice', method: '(unread)', client_era: '2025-11-25', outcome: 'denied', error_code: 413, error_message: `Payload Too Large: the limit is ${MAX_BODY} bytes`, request_bytes: null },
    ]);
  });

  it('401: recorded as (unauthenticated), the presented key nowhere in the row', async () => {
    const none = await post(hub.url, modernBody(3, 'tools/call', { name: 'modern__add', arguments: { a: 1, b: 2 } }), modernHeaders('tools/call', 'modern__add'));
    expect(none.status).toBe(401);
    const wrong = await post(hub.url, modernBody(4, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${WRONG_KEY}` });
    expect(wrong.status).toBe(401);
    const rows = await unreadRows(`principal = '(unauthenticated)'`, 4);
    expect(rows.map((x) => [x.method, x.error_code, x.outcome])).toEqual([
      ['tools/call', 401, 'denied'],
      ['tools/list', 401, 'denied'],
    ]);
    expect(rows[1]!.error_message).toBe('Unauthorized: unknown API key');
    expect(JSON.stringify(rows)).not.toContain(WRONG_KEY);
  });

  it('a flood of unauthenticated requests is answered in full but recorded only up to the throttle, the rest counted in the log', async () => {
    const before = (await unreadRows(`principal = '(unauthenticated)'`)).length;
    const replies = await Promise.all(Array.from({ length: 60 }, (_, i) => post(hub.url, modernBody(100 + i, 'tools/list'), modernHeaders('tools/list'))));
    expect(replies.every((r) => r.status === 401)).toBe(true);
    // 20 per address at once, and one more a second; the two before this test took two.
    const rows = await unreadRows(`principal = '(unauthenticated)'`, 4 + 18);
    const recorded = rows.length - before;
    expect(recorded).toBeGreaterThanOrEqual(18);
    expect(recorded).toBeLessThan(30);
    // Logged as the throttle first holds a row back, but written to stderr asynchronously (pino's
    // destination): on a loaded machine the line may reach this process after the rows reach SQLite.
    await expect.poll(() => hub.logs.some((l) => l.includes('unauthenticated requests refused faster than the ledger records them')), { timeout: 10_000 }).toBe(true);
    // An authenticated caller is not throttled by the flood.
    const ok = await post(hub.url, modernBody(200, 'tools/list'), { ...modernHeaders('tools/list'), authorization: `Bearer ${ALICE_KEY}` });
    expect(ok.status).toBe(200);
  });
});
