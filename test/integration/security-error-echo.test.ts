/**
 * An upstream's JSON-RPC error that gives credentials away in the hub's words: a value assigned
 * to a credential's name (`password=…`, which no token shape knows and the hub was never told),
 * the Authorization header and API key the hub sent it, a presigned URL's signature, written
 * out in its message, and the same under credential keys of its `data`. None of it reaches a client of either era, the
 * ledger (`switchyard ledger query`, /admin/ledger) or the hub's log (the era probe logs what
 * the upstream said to server/discover). The upstream is a raw node:http server on loopback
 * that echoes what it was sent.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, ledgerCli, modernCall, waitForReady, waitForRows } from './ledger-helpers.js';

/** The upstream's own database password: the hub never knew it; only its name gives it away. */
const DB_PASSWORD = 'Db-pw-only-upstream-9k2';
/** Sent by the hub as `Authorization: Bearer …`, from `${env:…}`. */
const BEARER = 'Bearer-Of-Hub-4m7n2b8v';
/** Sent by the hub as X-Api-Key, written literally in the config. */
const API_KEY = 'Literal-Api-Key-6t3r1e';
/** A Basic credential the upstream says it was given elsewhere (base64 of user:password). */
const BASIC = Buffer.from('svc:basic-pw-7h6g').toString('base64');
/** The signature of a presigned (SAS) URL the upstream names: the URL is a credential while it is valid. */
const SAS_SIG = 'k3Jd9%2BfQzW8vL0pXy5s4T7uV1cN2bM6aR%3D';
/** A bearer token too short for the shape rule (16), which the upstream says it was given once. */
const SHORT_BEARER = 'q7w8e9r0t';
const SECRETS = [DB_PASSWORD, BEARER, API_KEY, BASIC, SAS_SIG, SHORT_BEARER];

let hub: HubProcess;
let upstream: Server;
let dir: string;
let db: string;

/** What the upstream says when it fails: everything it knows, as careless servers do. */
function said(req: IncomingMessage): string {
  return `backend refused: password=${DB_PASSWORD}; request had Authorization: ${req.headers.authorization}, x-api-key=${req.headers['x-api-key']}; proxy said Proxy-Authorization: Basic ${BASIC}; blob https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&se=2026-12-31&sp=r&sig=${SAS_SIG}; the old session used Bearer ${SHORT_BEARER}`;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-error-echo-'));
  db = join(dir, 'ledger.db');
  upstream = createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const answer = (body: unknown, headers: Record<string, string> = {}): void => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const msg = JSON.parse(raw) as { id?: number | string; method: string };
      if (msg.method === 'initialize')
        return answer({ jsonrpc: '2.0', id: msg.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'echoer', version: '1.0.0' } } }, { 'mcp-session-id': 'echo-session' });
      if (msg.id === undefined) return void res.writeHead(202).end();
      if (msg.method === 'tools/list') return answer({ jsonrpc: '2.0', id: msg.id, result: { tools: [{ name: 'fail', inputSchema: { type: 'object' } }] } });
      const data = { password: DB_PASSWORD, request: { headers: { authorization: req.headers.authorization, 'x-api-key': req.headers['x-api-key'] } }, attempt: 3 };
      // server/discover (the era probe) and tools/call alike
      answer({ jsonrpc: '2.0', id: msg.id, error: { code: msg.method === 'tools/call' ? -32000 : -32601, message: said(req), data } });
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const port = (upstream.address() as { port: number }).port;
  hub = await startHub(
    {
      ledger: { path: db },
      servers: { echoer: { url: `http://127.0.0.1:${port}/mcp`, headers: { Authorization: 'Bearer ${env:SY_ECHO_BEARER}', 'X-Api-Key': API_KEY } } },
    },
    { dir, env: { SY_ECHO_BEARER: BEARER } },
  );
  await waitForReady(hub.url, ['echoer']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  await new Promise((resolve) => upstream?.close(resolve));
});

function expectNoSecret(text: string, where: string): void {
  for (const s of SECRETS) expect(text, `${where} holds ${s}`).not.toContain(s);
}

describe("an upstream's error that echoes credentials", () => {
  it('reaches a client of either era redacted, message and data', async () => {
    const modern = await modernCall(hub.url, 'echo-m', 'tools/call', { name: 'echoer__fail', arguments: {} });
    const legacy = await (await legacySession(hub.url)).call('echo-l', 'tools/call', { name: 'echoer__fail', arguments: {} });
    for (const [era, body] of [['modern', modern.body], ['legacy', legacy.body]] as const) {
      const error = body?.error as { code: number; message: string; data?: Record<string, unknown> };
      expect(error.code, era).toBe(-32000);
      expectNoSecret(JSON.stringify(error), era);
      expect(error.message, era).toContain('password=[redacted:credential];');
      expect(error.message, era).toContain('Proxy-Authorization: Basic [redacted:basic-credentials]');
      expect(error.message, era).toContain('&sp=r&sig=[redacted:credential]');
      expect(error.message, era).toContain('used Bearer [redacted:bearer-token]');
      // What is not a credential is passed on as the upstream sent it.
      expect(error.data, era).toMatchObject({ password: '[redacted:credential]', request: { headers: { authorization: '[redacted:credential]' } }, attempt: 3 });
    }
  });

  it('is stored redacted in the ledger, as `ledger query` and /admin/ledger show it', async () => {
    const rows = await waitForRows(db, { tool: 'echoer__fail' }, (r) => r.length >= 2);
    for (const row of rows) expect(row.errorMessage).toContain('password=[redacted');
    const cli = await ledgerCli(db, ['query', '--json']);
    expect(cli.code).toBe(0);
    expectNoSecret(cli.stdout, 'ledger query');
    const admin = await (await fetch(hub.url.replace(/\/mcp$/, '/admin/ledger?server=echoer'))).text();
    expect(admin).toContain('echoer__fail');
    expectNoSecret(admin, '/admin/ledger');
  });

  it("never reaches the hub's log, the era probe's line included", async () => {
    expect(hub.logs.some((l) => l.includes('era probe') && l.includes('password=[redacted:credential]'))).toBe(true);
    expectNoSecret(hub.logs.join('\n'), 'the log');
  });
});
