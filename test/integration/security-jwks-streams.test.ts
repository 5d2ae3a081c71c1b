/**
 * A key removed from the JWKS revokes its tokens for streams too, as removing an API key does:
 * what a token signed by it opened (a modern listen stream, a legacy session's GET stream, the
 * live feed by header or by ticket) ends once the hub reads the new key set, with no request
 * needed to notice it; another key's streams go on. Real built hub, a `jwksFile`, tokens made
 * with jose, raw HTTP and WebSocket clients over loopback.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ISSUER, signingKey, token, writeJwks, type SigningKey } from '../helpers/auth.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post } from '../helpers/wire.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a key removed from the JWKS file ends its tokens' streams", () => {
  let hub: HubProcess;
  let dir: string;
  let k1: SigningKey;
  let k2: SigningKey;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-jwks-streams-'));
    [k1, k2] = await Promise.all([signingKey('k1'), signingKey('k2')]);
    writeJwks(join(dir, 'jwks.json'), [k1, k2]);
    hub = await startHub({ auth: { oauth: { issuer: ISSUER, jwksFile: 'jwks.json', jwksCooldownMs: 600_000 } }, servers: { modern: nodeServer('test/fixtures/servers/sdk2-modern-server.mjs') } }, { dir });
  }, 60_000);

  afterAll(async () => {
    await hub?.stop();
  });

  const ended = (res: Response) =>
    (async () => {
      const reader = res.body!.getReader();
      while (!(await reader.read().catch(() => ({ done: true }))).done);
      return 'ended';
    })();

  it("a listen stream, a legacy session's GET stream and the live feed (header, ticket) of a token whose key left the file end; another key's go on", async () => {
    const t1 = await token(k1, { aud: hub.url, sub: 'streamer', scope: 'switchyard:admin' });
    const t2 = await token(k2, { aud: hub.url, sub: 'stayer' });
    const events = hub.url.replace('http', 'ws').replace(/\/mcp$/, '/admin/events');
    const feed = async (url: string, headers: Record<string, string> = {}) => {
      const ws = new WebSocket(url, { headers });
      await new Promise((resolve, reject) => {
        ws.once('open', resolve);
        ws.once('error', reject);
      });
      // Wrapped: an async function's promise would take on this one's (and wait for the close).
      return { closed: new Promise<number>((resolve) => ws.once('close', (code) => resolve(code))) };
    };
    const byHeader = await feed(events, { authorization: `Bearer ${t1}` });
    const { ticket } = (await (await fetch(new URL('/admin/ticket', hub.url), { method: 'POST', headers: { authorization: `Bearer ${t1}` } })).json()) as { ticket: string };
    const byTicket = await feed(`${events}?ticket=${ticket}`);
    const listen = async (t: string, id: string) => {
      const res = await fetch(hub.url, {
        method: 'POST',
        headers: { ...modernHeaders('subscriptions/listen'), authorization: `Bearer ${t}` },
        body: JSON.stringify(modernBody(id, 'subscriptions/listen', { notifications: { toolsListChanged: true } })),
      });
      expect(res.status).toBe(200);
      return { ended: ended(res) };
    };
    const listen1 = await listen(t1, 'l1');
    const listen2 = await listen(t2, 'l2');
    const legacy = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${t1}` };
    const init = await post(hub.url, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'revoked', version: '1' } } }, legacy);
    const session = { ...legacy, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    await post(hub.url, { jsonrpc: '2.0', method: 'notifications/initialized' }, session);
    const get = await fetch(hub.url, { headers: { ...session, accept: 'text/event-stream' } });
    expect(get.status).toBe(200);
    const getEnded = ended(get);

    // No request after it: the hub finds the change itself.
    writeJwks(join(dir, 'jwks.json'), [k2]);
    const within = <T>(p: Promise<T>) => Promise.race([p, sleep(5_000).then(() => 'still open' as const)]);
    expect(await within(listen1.ended)).toBe('ended');
    expect(await within(getEnded)).toBe('ended');
    expect(await within(byHeader.closed)).toBe(4001);
    expect(await within(byTicket.closed)).toBe(4001);
    expect(await Promise.race([listen2.ended, sleep(500).then(() => 'still open')])).toBe('still open');
    expect(hub.logs.some((l) => l.includes('no longer verifies'))).toBe(true);
    expect(hub.logs.join('\n')).not.toContain(t1);
  }, 30_000);
});
