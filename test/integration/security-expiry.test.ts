/**
 * A stream lives no longer than the OAuth token that opened it: a legacy session's GET stream,
 * a modern subscriptions/listen stream and the status page's live feed (by header and by
 * ticket) end when the token expires, while the same streams opened with a longer-lived token
 * stay open. The real built hub, tokens made with jose, raw HTTP and `ws`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { AUDIENCE, ISSUER, signingKey, token, waitForReadyWith, writeJwks, type SigningKey } from '../helpers/auth.js';
import { LEGACY_VERSION, modernBody, modernHeaders, post } from '../helpers/wire.js';

/** Seconds the short tokens live: long enough to open every stream first. */
const SHORT_S = 4;

let hub: HubProcess;
let key: SigningKey;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-expiry-'));
  key = await signingKey('k1');
  writeJwks(join(dir, 'jwks.json'), [key]);
  hub = await startHub(
    {
      auth: { oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', clockToleranceSec: 0 } },
      servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') },
    },
    { dir },
  );
  await waitForReadyWith(hub.url, ['modern'], await token(key, { scope: 'switchyard:admin' }));
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const bearer = async (expiresIn: number) => token(key, { scope: 'switchyard:admin', expiresIn });

/** Opens a streaming response and resolves when it ends (ms after `t0`), or never. */
async function openStream(init: RequestInit): Promise<{ status: number; ended: Promise<number> }> {
  const t0 = Date.now();
  const res = await fetch(hub.url, init);
  const reader = res.body!.getReader();
  const ended = (async () => {
    try {
      while (!(await reader.read()).done);
    } catch {
      // cut: ended too
    }
    return Date.now() - t0;
  })();
  return { status: res.status, ended };
}

async function legacyGetStream(auth: string): Promise<{ status: number; ended: Promise<number> }> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${auth}` };
  const init = await post(hub.url, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: LEGACY_VERSION, capabilities: {}, clientInfo: { name: 'expiry', version: '1' } } }, headers);
  const sid = init.headers.get('mcp-session-id');
  if (!sid) throw new Error(`no session: ${init.status} ${init.text}`);
  const h = { ...headers, 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION };
  await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h);
  return openStream({ method: 'GET', headers: { accept: 'text/event-stream', 'mcp-session-id': sid, 'mcp-protocol-version': LEGACY_VERSION, authorization: `Bearer ${auth}` } });
}

function listenStream(auth: string): Promise<{ status: number; ended: Promise<number> }> {
  return openStream({
    method: 'POST',
    headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${auth}` },
    body: JSON.stringify(modernBody('listen-1', 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
  });
}

function feed(url: string, headers: Record<string, string> = {}): Promise<{ opened: true; closed: Promise<number> }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const closed = new Promise<number>((r) => ws.on('close', (code) => r(code)));
    ws.on('open', () => resolve({ opened: true, closed }));
    ws.on('error', reject);
  });
}

const notYet = <T>(p: Promise<T>) => Promise.race([p.then(() => 'ended'), new Promise((r) => setTimeout(() => r('open'), 50))]);

describe('streams end with the OAuth token that opened them', () => {
  it('GET streams, listen streams and live feeds close at the token expiry; longer-lived ones stay', async () => {
    const short = await bearer(SHORT_S);
    const long = await bearer(300);
    const wsBase = hub.url.replace('http', 'ws').replace(/\/mcp$/, '/admin/events');
    const ticketFor = async (auth: string) =>
      ((await (await fetch(new URL('/admin/ticket', hub.url), { method: 'POST', headers: { authorization: `Bearer ${auth}` } })).json()) as { ticket: string }).ticket;

    const t0 = Date.now();
    const [getShort, getLong, listenShort, listenLong] = await Promise.all([legacyGetStream(short), legacyGetStream(long), listenStream(short), listenStream(long)]);
    for (const s of [getShort, getLong, listenShort, listenLong]) expect(s.status).toBe(200);
    const feedShort = await feed(wsBase, { authorization: `Bearer ${short}` });
    const feedLong = await feed(wsBase, { authorization: `Bearer ${long}` });
    const ticketShort = await feed(`${wsBase}?ticket=${encodeURIComponent(await ticketFor(short))}`);
    const ticketLong = await feed(`${wsBase}?ticket=${encodeURIComponent(await ticketFor(long))}`);
    expect(Date.now() - t0).toBeLessThan((SHORT_S - 1) * 1000); // all opened well before the expiry

    // Each short one ends by itself, after the token's exp (whole seconds) and not long after.
    const bound = (SHORT_S + 2) * 1000;
    const timeout = (what: string) => new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`${what} still open`)), bound + 2000));
    await Promise.race([Promise.all([getShort.ended, listenShort.ended]), timeout('a stream')]);
    expect(await Promise.race([feedShort.closed, timeout('the feed')])).toBe(4001);
    expect(await Promise.race([ticketShort.closed, timeout('the ticket feed')])).toBe(4001);
    expect(Date.now() - t0).toBeGreaterThanOrEqual((SHORT_S - 1) * 1000);

    // The long-lived token's streams outlived them.
    expect(await notYet(getLong.ended)).toBe('open');
    expect(await notYet(listenLong.ended)).toBe('open');
    expect(await notYet(feedLong.closed)).toBe('open');
    expect(await notYet(ticketLong.closed)).toBe('open');
  }, 30_000);
});
