/**
 * A modern client's retry of a 2026 upstream's `input_required` that the upstream refuses 401 (or
 * 403) does not use up the hub's requestState: the refusal says the request was not applied
 * (RFC 9110 §15.5.2), as it frees an idempotency key, so the same retry, once the upstream takes
 * the hub's credential again (a new login), goes through. Real modern HTTP fixture behind a
 * loopback proxy that refuses its tools/call and resources/read POSTs while told to, the real
 * built hub, on the raw wire.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json, type RawReply } from '../helpers/wire.js';
import { MODERN_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';
import { queryRows } from './ledger-helpers.js';

const ASKING = modernMeta({ [META_CAPS]: USER_CAPABILITIES });
let hub: HubProcess;
let fixture: HttpFixture;
let proxy: Server;
/** The status the proxy answers tools/call and resources/read POSTs with instead of passing them on. */
let refuseWith: number | undefined;
let refused = 0;
let nextId = 1;

async function request(method: string, params: Json, name: string): Promise<RawReply> {
  const id = nextId++;
  const r = await post(hub.url, modernBody(id, method, params, ASKING), modernHeaders(method, name));
  return { ...r, body: r.messages.find((m) => m.id === id) };
}

beforeAll(async () => {
  fixture = await startHttpFixture(MODERN_FIXTURE, { SERVER_NAME: 'modern-http' });
  const target = new URL(fixture.url);
  proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const method = req.method === 'POST' ? (JSON.parse(body.toString() || '{}') as { method?: string }).method : undefined;
      if (refuseWith !== undefined && (method === 'tools/call' || method === 'resources/read')) {
        refused++;
        res.writeHead(refuseWith, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer error="invalid_token"' }).end('refused');
        return;
      }
      const out = httpRequest({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      out.on('error', () => res.destroy());
      res.on('close', () => out.destroy());
      out.end(body);
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  const port = (proxy.address() as { port: number }).port;
  hub = await startHub({ servers: { mh: { url: `http://127.0.0.1:${port}${target.pathname}`, retry: { maxAttempts: 1, budgetMs: 1000 } } } });
  await waitForReady(hub.url, ['mh']);
}, 60_000);
afterAll(async () => {
  await hub?.stop();
  proxy?.closeAllConnections();
  await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
  await fixture?.stop();
});

describe('a retry of an input_required that the upstream refused 401/403', () => {
  it('tools/call: leaves the requestState usable, and the same retry goes through once the upstream takes it (then it is used)', async () => {
    const name = 'mh__elicit_form';
    const first = await request('tools/call', { name, arguments: {} }, name);
    const state = (first.body?.result as Json | undefined)?.requestState;
    expect(state, first.text).toMatch(/^sy1\./);
    const retry = { name, arguments: {}, requestState: state, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } } };

    refuseWith = 401;
    const before = refused;
    const denied = await request('tools/call', retry, name);
    expect(denied.body?.result, denied.text).toMatchObject({ isError: true, content: [{ type: 'text', text: expect.stringMatching(/HTTP 401/) }] });
    expect(refused).toBe(before + 1);

    refuseWith = undefined;
    const back = await request('tools/call', retry, name);
    expect(back.body?.error, back.text).toBeUndefined();
    expect(back.body?.result, back.text).toMatchObject({ content: [{ type: 'text', text: 'action=accept content={"name":"Ada"}' }] });

    // Applied this time: used up.
    const replayed = await request('tools/call', retry, name);
    expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
    const outcomes = (await queryRows(join(hub.dir, 'ledger.db'), { tool: name })).map((r) => r.outcome);
    expect(outcomes).toEqual(['input_required', 'unavailable', 'ok', 'rpc_error']);
  }, 60_000);

  it('resources/read: the same after a 403', async () => {
    const uri = 'consent://modern-http/doc';
    const first = await request('resources/read', { uri }, uri);
    const state = (first.body?.result as Json | undefined)?.requestState;
    expect(state, first.text).toMatch(/^sy1\./);
    const retry = { uri, requestState: state, inputResponses: { who: { action: 'accept', content: { name: 'Bo' } } } };

    refuseWith = 403;
    const before = refused;
    const denied = await request('resources/read', retry, uri);
    expect(denied.body?.error, denied.text).toBeDefined();
    expect(denied.body?.error?.message).not.toMatch(/requestState/);
    expect(refused).toBe(before + 1);

    refuseWith = undefined;
    const back = await request('resources/read', retry, uri);
    expect(back.body?.error, back.text).toBeUndefined();
    expect(JSON.stringify(back.body?.result)).toContain('Bo');

    const replayed = await request('resources/read', retry, uri);
    expect(replayed.body?.error, replayed.text).toMatchObject({ code: -32602, message: 'requestState was already used' });
  }, 60_000);
});
