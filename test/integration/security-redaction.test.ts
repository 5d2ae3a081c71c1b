/**
 * Credentials an upstream gives away never reach the client or the ledger: an upstream's
 * JSON-RPC error naming its own token and a database password is passed on redacted, and
 * stored redacted; with ledger.storeBodies, arguments and results are stored, redacted the same
 * way. The upstream is a real process over stdio (test/fixtures/quirks/leaky-errors.mjs).
 */
import Database from 'better-sqlite3';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernCall, waitForReady, waitForRows } from './ledger-helpers.js';

const TOKEN = 'ghp_' + 'Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA9';
const DB_PASSWORD = 'Tr0ub4dor-and-3';
const CLIENT_PASSWORD = 'hunter2-but-longer';
/** Of no known shape: only its name (`DB_PASSWORD=`, `"apiKey":`) says it is a credential. */
const LOG_PASSWORD = 'plain-Pa55word-xyz';
/** `deploy:<a password>` in base64: an HTTP Basic credential. */
const BASIC = Buffer.from('deploy:s3cret-basic-pw').toString('base64');

let hub: HubProcess;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-redaction-'));
  hub = await startHub(
    {
      ledger: { path: join(dir, 'ledger.db'), storeBodies: true },
      servers: { leaky: nodeServer('test/fixtures/quirks/leaky-errors.mjs', [], { QUIRK_SECRET: TOKEN, QUIRK_DB_PASSWORD: DB_PASSWORD, QUIRK_LOG_PASSWORD: LOG_PASSWORD, QUIRK_BASIC: BASIC }) },
    },
    { dir },
  );
  await waitForReady(hub.url, ['leaky']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  const logs = hub.logs.join('\n');
  for (const s of [TOKEN, DB_PASSWORD, CLIENT_PASSWORD, LOG_PASSWORD, BASIC]) expect(logs).not.toContain(s);
});

function stored(requestId: string): { args_json: string | null; result_json: string | null; error_message: string | null } {
  const db = new Database(join(dir, 'ledger.db'), { readonly: true });
  try {
    return db.prepare('SELECT args_json, result_json, error_message FROM audit WHERE request_id = ?').get(requestId) as never;
  } finally {
    db.close();
  }
}

describe('credentials an upstream gives away', () => {
  it("are redacted in the upstream's error the client gets, and in the ledger's row", async () => {
    const r = await modernCall(hub.url, 'leak-1', 'tools/call', { name: 'leaky__slow', arguments: {} });
    const error = r.body?.error as { code: number; message: string; data?: Record<string, unknown> };
    expect(error.code).toBe(-32000);
    const wire = JSON.stringify(error);
    expect(wire).not.toContain(TOKEN);
    expect(wire).not.toContain(DB_PASSWORD);
    expect(error.message).toContain('[redacted:github-token]');
    expect(error.message).toContain('postgres://app:[redacted:url-credentials]@db.internal:5432/app');
    // What is not a credential is passed on as the upstream sent it; a value under a
    // credential's key is redacted whatever its shape.
    expect(error.data).toMatchObject({ apiKey: '[redacted:credential]', dsn: 'postgres://app:[redacted:url-credentials]@db.internal:5432/app', attempt: 2 });

    await waitForRows(join(dir, 'ledger.db'), { tool: 'leaky__slow' });
    const row = stored('leak-1');
    expect(row.error_message).toMatch(/upstream request failed/);
    expect(row.error_message).not.toContain(TOKEN);
    expect(row.error_message).not.toContain(DB_PASSWORD);
  });

  it('with storeBodies, arguments and results are stored, their credentials redacted', async () => {
    // An Authorization header written out in text: `Basic` (a password in base64) as `Bearer`.
    const curl = `curl -H 'Authorization: Basic ${BASIC}' https://git.example/api`;
    const args = { url: `https://deploy:${CLIENT_PASSWORD}@git.example/repo.git`, note: `use ${TOKEN}`, count: 3, curl };
    const r = await modernCall(hub.url, 'leak-2', 'tools/call', { name: 'leaky__echo', arguments: args });
    expect(r.body?.result).toBeDefined();
    await waitForRows(join(dir, 'ledger.db'), { tool: 'leaky__echo' });
    const row = stored('leak-2');
    expect(JSON.parse(row.args_json!)).toEqual({
      url: 'https://deploy:[redacted:url-credentials]@git.example/repo.git',
      note: 'use [redacted:github-token]',
      count: 3,
      curl: "curl -H 'Authorization: Basic [redacted]' https://git.example/api",
    });
    expect(row.result_json).not.toBeNull();
    const result = JSON.parse(row.result_json!) as { content: { text: string }[] };
    expect(result.content[0]!.text).toContain('deploy:[redacted:url-credentials]@git.example');
    expect(result.content[0]!.text).toContain('Authorization: Basic [redacted]');
    for (const s of [TOKEN, CLIENT_PASSWORD, BASIC]) {
      expect(row.args_json).not.toContain(s);
      expect(row.result_json).not.toContain(s);
    }
  });

  // A config's headers or a request dump quoted without the header's name: the scheme alone says it.
  it('a Basic credential with no Authorization: before it is stored redacted too, and is redacted in what the client gets back from the ledger', async () => {
    const args = { header: `X-Upstream-Auth: Basic ${BASIC}`, bare: `Basic ${BASIC}`, prose: 'Basic auth is on' };
    const r = await modernCall(hub.url, 'leak-basic', 'tools/call', { name: 'leaky__echo', arguments: args });
    expect(r.body?.result).toBeDefined();
    await waitForRows(join(dir, 'ledger.db'), { tool: 'leaky__echo' });
    const row = stored('leak-basic');
    expect(JSON.parse(row.args_json!)).toEqual({ header: 'X-Upstream-Auth: Basic [redacted:basic-credentials]', bare: 'Basic [redacted:basic-credentials]', prose: 'Basic auth is on' });
    expect(row.result_json).not.toContain(BASIC);
    const view = await fetch(new URL('/admin/ledger?limit=50', hub.url));
    expect(view.status).toBe(200);
    expect(await view.text()).not.toContain(BASIC);
  });

  // With bodies kept (up to 1 MiB each, two a row), /admin/ledger read every row asked for (up
  // to 1,000) into the hub's memory and made one string of them: gigabytes.
  it('/admin/ledger ends an answer early past 8 MiB of stored bodies, saying so', async () => {
    const big = 'x'.repeat(900_000);
    for (let i = 0; i < 5; i++) expect((await modernCall(hub.url, `big-${i}`, 'tools/call', { name: 'leaky__echo', arguments: { big } })).body?.result).toBeDefined();
    const last = async () => ((await (await fetch(`http://127.0.0.1:${hub.port}/admin/ledger?requestId=big-4`)).json()) as { rows: { outcome: string }[] }).rows[0]?.outcome;
    for (const until = Date.now() + 5_000; (await last()) !== 'ok'; await new Promise((r) => setTimeout(r, 20))) if (Date.now() > until) throw new Error('no finished row of big-4');
    const res = await fetch(`http://127.0.0.1:${hub.port}/admin/ledger?tool=leaky__echo&limit=20`);
    const text = await res.text();
    const body = JSON.parse(text) as { rows: { requestId: string }[]; truncated?: boolean };
    expect(body.truncated).toBe(true);
    // The newest first, as many as 8 MiB of bodies hold (each row about 1.8 MB of them).
    expect(body.rows.map((r) => r.requestId)).toEqual(['big-4', 'big-3', 'big-2', 'big-1']);
    expect(text.length).toBeLessThan(10_000_000);
    // Under the bound, no such field.
    expect(await (await fetch(`http://127.0.0.1:${hub.port}/admin/ledger?tool=leaky__echo&limit=2`)).json()).not.toHaveProperty('truncated');
  });

  it("are redacted in the hub's log of the upstream's stderr and stray stdout", async () => {
    const lines = (): string[] => hub.logs;
    const deadline = Date.now() + 10_000;
    while (lines().filter((l) => l.includes('child stderr') || l.includes('not JSON-RPC')).length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const logged = lines().filter((l) => l.includes('child stderr') || l.includes('not JSON-RPC'));
    expect(logged.join('\n')).toContain('postgres://app:[redacted:url-credentials]@db.internal');
    expect(logged.join('\n')).toContain('with token [redacted:github-token]');
    expect(logged.join('\n')).toContain('DB_PASSWORD=[redacted:credential]');
    expect(logged.join('\n')).toContain('password=[redacted:credential]');
    // A request dump's Authorization header keeps its scheme only, whatever the scheme (a Basic user:password is marked by the shared basic-credentials rule first).
    expect(logged.join('\n')).toContain('Authorization: Basic [redacted:basic-credentials]');
    for (const s of [TOKEN, DB_PASSWORD, LOG_PASSWORD, BASIC]) expect(logged.join('\n')).not.toContain(s);
  });
});

describe('credentials an upstream echoes while it cannot be started', () => {
  const BEARER = 'Bearer abcdefghijklmnopqrstuvwxyz012345';
  let upstream: import('node:http').Server;
  let other: HubProcess;
  beforeAll(async () => {
    const { createServer } = await import('node:http');
    // Refuses every request, naming the credential it got (as some servers do).
    upstream = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32600, message: `invalid credentials: ${BEARER} (key ${TOKEN})` } }));
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(upstream.address() as import('node:net').AddressInfo).port}/mcp`;
    other = await startHub({ servers: { pinned: { url, era: '2026-07-28' }, probed: { url } } });
  }, 60_000);
  afterAll(async () => {
    await other?.stop();
    upstream?.close();
    const logs = other.logs.join('\n');
    expect(logs).not.toContain(TOKEN);
    expect(logs).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
  });

  it('are redacted in lastError (/healthz, /admin/servers) and in every log line', async () => {
    const base = other.url.replace(/\/mcp$/, '');
    let health: { servers: { id: string; lastError?: string }[] } | undefined;
    await expect
      .poll(async () => {
        health = (await (await fetch(`${base}/healthz`)).json()) as typeof health;
        return health!.servers.filter((s) => s.lastError).length;
      }, { timeout: 15_000 })
      .toBe(2);
    const admin = await (await fetch(`${base}/admin/servers`)).text();
    for (const text of [JSON.stringify(health), admin]) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain('abcdefghijklmnopqrstuvwxyz012345');
    }
    expect(health!.servers.find((s) => s.id === 'pinned')!.lastError).toMatch(/configured as 2026-07-28, but HTTP 400 -32600 invalid credentials: .*\[redacted:/);
    // The era probe's own log line says what the server answered, redacted too.
    await expect.poll(() => other.logs.some((l) => l.includes('era probe') && l.includes('[redacted:'))).toBe(true);
  });
});
