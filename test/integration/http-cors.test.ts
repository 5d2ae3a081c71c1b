/**
 * CORS for the browser origins an operator lists in `listen.allowedOrigins`: a preflight of the
 * MCP endpoint is answered without credentials, and answers are readable by that origin
 * (Mcp-Session-Id exposed). Loopback origins, allowed by default for non-browser clients, get no
 * CORS: any local web page could otherwise drive an unauthenticated hub. Raw node:http requests
 * against the real built hub.
 */
import { request } from 'node:http';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { LEGACY_VERSION, waitForReady } from '../helpers/wire.js';

const APP = 'https://app.example';
let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ listen: { allowedOrigins: [APP] }, groups: { g: { servers: ['s'] } }, servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') } });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; text: string }> {
  const u = new URL(path, hub.url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** One keep-alive POST on a socket of its own, as a browser sends it (the hub's fast path). */
function rawPost(body: string): Promise<{ status: number; headers: Record<string, string> }> {
  const u = new URL(hub.url);
  return new Promise((resolve, reject) => {
    const s = net.connect(Number(u.port), '127.0.0.1');
    s.on('error', reject);
    let got = '';
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      const end = got.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [status, ...lines] = got.slice(0, end).split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      s.destroy();
      resolve({ status: Number(status!.split(' ')[1]), headers });
    });
    s.write(`POST /mcp HTTP/1.1\r\nHost: ${u.host}\r\nOrigin: ${APP}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  });
}

describe('CORS for listed browser origins', () => {
  it('answers a preflight of the MCP endpoint, naming what it allows', async () => {
    const r = await send('OPTIONS', '/mcp', { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, mcp-protocol-version, mcp-session-id' });
    expect(r.status).toBe(204);
    expect(r.headers['access-control-allow-origin']).toBe(APP);
    expect(r.headers['access-control-allow-methods']).toBe('GET, POST, DELETE');
    expect(r.headers['access-control-allow-headers']).toBe('content-type, mcp-protocol-version, mcp-session-id');
    expect(r.headers.vary).toBe('Origin');
  });

  it("answers a preflight of a group's endpoint, and gives one of a group that does not exist the 404 a POST there gets", async () => {
    const preflight = { origin: APP, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' };
    expect((await send('OPTIONS', '/mcp/g', preflight)).status).toBe(204);
    const none = await send('OPTIONS', '/mcp/nosuch', preflight);
    expect(none.status).toBe(404);
    expect(JSON.parse(none.text).error.message).toContain('no tool group named "nosuch"');
    expect(none.headers['access-control-allow-methods']).toBeUndefined();
  });

  it('makes answers readable by that origin, the session id included', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'browser', version: '1' } } });
    for (const r of [await send('POST', '/mcp', { origin: APP, 'content-type': 'application/json', accept: 'application/json', 'content-length': String(Buffer.byteLength(body)) }, body), await rawPost(body)]) {
      expect(r.status).toBe(200);
      expect(r.headers['mcp-session-id']).toBeTruthy();
      expect(r.headers['access-control-allow-origin']).toBe(APP);
      expect(String(r.headers['access-control-expose-headers'])).toContain('Mcp-Session-Id');
    }
    // node:http's routes too.
    const health = await send('GET', '/healthz', { origin: APP });
    expect(health.headers['access-control-allow-origin']).toBe(APP);
    // Without an Origin: no CORS, but a cache is told the answer depends on it.
    const plain = await send('GET', '/healthz', {});
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    expect(plain.headers.vary).toBe('Origin');
  });

  it('gives loopback origins (allowed, not listed) no CORS, and refuses other origins', async () => {
    const local = await send('OPTIONS', '/mcp', { origin: 'http://localhost:3000', 'access-control-request-method': 'POST' });
    expect(local.status).toBe(405);
    expect(local.headers['access-control-allow-origin']).toBeUndefined();
    const evil = await send('OPTIONS', '/mcp', { origin: 'https://evil.example', 'access-control-request-method': 'POST' });
    expect(evil.status).toBe(403);
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
  });
});
