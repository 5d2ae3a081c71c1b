/**
 * A remote server's credential from the config (`headers` with `${env:…}`), refused after the
 * hub started: the token is sent on every request, a 401 with a WWW-Authenticate challenge that
 * quotes it is told to the client in words an operator can act on, with the token nowhere (the
 * client's error, the ledger, the hub's log, /healthz), and any number of such refusals leave
 * the circuit closed (they say nothing of the server's health). The server is a raw `node:http`
 * one in this process; the hub is the real one.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { callTool, isToolError, rowsFor, serverHealth, text, waitForState } from './faults-helpers.js';

/** Of no shape the credential rules know: only the hub's knowledge of its config tells it is a secret. */
const TOKEN = 'Remote-7Qz4kP9w2Lm';

let hub: HubProcess;
let server: http.Server;
/** The Authorization header of every POST, in order. */
const auths: (string | undefined)[] = [];
let revoked = false;

beforeAll(async () => {
  server = http.createServer(async (req, res) => {
    let body = '';
    for await (const c of req) body += c;
    if (req.method !== 'POST') return void res.writeHead(405).end();
    auths.push(req.headers.authorization);
    const msg = JSON.parse(body) as { id?: number; method: string; params?: { name?: string } };
    if (req.headers.authorization !== `Bearer ${TOKEN}` || (revoked && msg.method === 'tools/call')) {
      res.writeHead(401, { 'www-authenticate': `Bearer error="invalid_token", error_description="the token ${TOKEN} was revoked"`, 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ error: 'invalid_token' }));
    }
    if (msg.id === undefined) return void res.writeHead(202).end();
    const result =
      msg.method === 'initialize'
        ? { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'remote', version: '1' } }
        : msg.method === 'tools/list'
          ? { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] }
          : msg.method === 'tools/call'
            ? { content: [{ type: 'text', text: 'echoed' }] }
            : undefined;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(result ? { jsonrpc: '2.0', id: msg.id, result } : { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  hub = await startHub(
    { servers: { remote: { url, era: '2025-11-25', headers: { Authorization: 'Bearer ${env:REMOTE_TOKEN}' }, healthCheckMs: 0, circuitBreaker: { failures: 2, cooldownMs: 300 } } } },
    { env: { REMOTE_TOKEN: TOKEN } },
  );
  await waitForState(hub.url, 'remote', ['ready']);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
  server?.closeAllConnections();
  server?.close();
});

describe('a remote server that refuses the credential from the config', () => {
  it('is sent the token on every request; a 401 says what to do, never the token, and does not open the circuit', async () => {
    expect(text(await callTool(hub.url, 'remote__echo'))).toBe('echoed');
    expect(auths.length).toBeGreaterThan(0);
    expect(auths.every((a) => a === `Bearer ${TOKEN}`)).toBe(true);
    revoked = true;
    // More refusals than circuitBreaker.failures.
    for (let i = 0; i < 4; i++) {
      const a = await callTool(hub.url, 'remote__echo');
      expect(isToolError(a)).toBe(true);
      expect(text(a)).toContain('HTTP 401');
      expect(text(a)).toContain('the server refused the credential the hub sent (invalid_token: the token [redacted:config-secret] was revoked): check the credential in servers.remote.headers');
      expect(text(a)).not.toContain(TOKEN);
    }
    const s = await serverHealth(hub.url, 'remote');
    expect([s.state, s.circuit]).toEqual(['ready', 'closed']);
    const rows = await rowsFor(hub.dir + '/ledger.db', 'remote__echo', 5);
    expect(rows.map((r) => r.outcome)).toEqual(['ok', 'unavailable', 'unavailable', 'unavailable', 'unavailable']);
    expect(JSON.stringify(rows)).not.toContain(TOKEN);
    expect(hub.logs.join('\n')).not.toContain(TOKEN);
    // Taken back: the next call works on the same session, no reconnect needed.
    revoked = false;
    expect(text(await callTool(hub.url, 'remote__echo'))).toBe('echoed');
  });
});
