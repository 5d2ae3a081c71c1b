/** The stdio ↔ HTTP bridge (`switchyard connect`) against a real loopback server standing in for the hub. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { HttpBridge } from '../../src/transport/http-bridge.js';

const servers: http.Server[] = [];
const bridges: HttpBridge[] = [];
afterEach(async () => {
  await Promise.all(bridges.splice(0).map((b) => b.close(0)));
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

describe('HttpBridge', () => {
  it('a kept-alive connection the hub closes as a message comes: a request other than a tools/call, one keyed for a hub that honours keys, or a notification, is sent again', async () => {
    // A sessionless legacy peer whose next `drop` message on a connection that served one before
    // is closed unread: an idle timeout firing as the bridge sends.
    let drop: string | undefined;
    let keysKept = false;
    const served = new WeakMap<object, number>();
    const seen: string[] = [];
    const server = http.createServer(async (req, res) => {
      let body = '';
      for await (const c of req) body += c;
      const msg = JSON.parse(body) as { id?: number; method: string };
      seen.push(msg.method);
      const n = served.get(req.socket) ?? 0;
      served.set(req.socket, n + 1);
      if (drop === msg.method && n > 0) {
        drop = undefined;
        return void req.socket.destroy();
      }
      if (msg.id === undefined) return void res.writeHead(202).end();
      // Its handshake says it honours idempotency keys, as a hub with its ledger on does.
      const keys = msg.method === 'initialize' && keysKept ? { 'switchyard-idempotency-keys': 'kept' } : {};
      res.writeHead(200, { 'content-type': 'application/json', ...keys }).end(JSON.stringify({ jsonrpc: '2.0', id: msg.id, result: { method: msg.method } }));
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const out: { id?: number; result?: unknown; error?: { message: string } }[] = [];
    const bridge = new HttpBridge({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, log: silentLogger }, (m) => out.push(m as (typeof out)[number]));
    bridges.push(bridge);
    let id = 0;
    const ask = async (method: string, params: Record<string, unknown> = {}): Promise<(typeof out)[number]> => {
      const mine = ++id;
      bridge.line(JSON.stringify({ jsonrpc: '2.0', id: mine, method, params }));
      await expect.poll(() => out.some((m) => m.id === mine), { timeout: 5000, interval: 5 }).toBe(true);
      return out.find((m) => m.id === mine)!;
    };
    const count = (method: string): number => seen.filter((m) => m === method).length;
    /** Sequential messages take turns on two connections (one may be new): until one was dropped. */
    const untilDropped = async (method: string, send: () => Promise<unknown>): Promise<unknown[]> => {
      drop = method;
      const got: unknown[] = [];
      for (let i = 0; i < 6 && drop !== undefined; i++) got.push(await send());
      expect(drop).toBeUndefined();
      return got;
    };

    // (Not ping: one before the client's initialize is the bridge's to answer, as `stdio` does.)
    const lists = await untilDropped('prompts/list', () => ask('prompts/list'));
    expect(lists).toEqual(lists.map(() => expect.objectContaining({ result: { method: 'prompts/list' } })));
    expect(count('prompts/list')).toBe(lists.length + 1);

    const calls = await untilDropped('tools/call', () => ask('tools/call'));
    expect(calls.at(-1)).toMatchObject({ error: { message: expect.stringMatching(/other side closed/) } });
    expect(count('tools/call')).toBe(calls.length);

    // One with an idempotency key, to a hub that has not said it honours keys (its ledger off, or
    // too old to say): not sent again, as the hub would run it twice.
    let before = count('tools/call');
    const unsaid = await untilDropped('tools/call', () => ask('tools/call', { name: 't', _meta: { 'dev.switchyard/idempotency-key': 'k-0' } }));
    expect(unsaid.at(-1)).toMatchObject({ error: { message: expect.stringMatching(/other side closed/) } });
    expect(count('tools/call') - before).toBe(unsaid.length);
    // Nor after a handshake without the header (a hub with the ledger off).
    await ask('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } });
    before = count('tools/call');
    const off = await untilDropped('tools/call', () => ask('tools/call', { name: 't', _meta: { 'dev.switchyard/idempotency-key': 'k-off' } }));
    expect(count('tools/call') - before).toBe(off.length);

    // Once the hub's handshake said it honours keys, it is sent again: the hub runs it once, by its
    // key. An empty key is none (the hub refuses it), so that call is not.
    keysKept = true;
    await ask('initialize', { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '1' } });
    before = count('tools/call');
    const keyed = await untilDropped('tools/call', () => ask('tools/call', { name: 't', _meta: { 'dev.switchyard/idempotency-key': 'k-1' } }));
    expect(keyed).toEqual(keyed.map(() => expect.objectContaining({ result: { method: 'tools/call' } })));
    expect(count('tools/call') - before).toBe(keyed.length + 1);
    const empty = await untilDropped('tools/call', () => ask('tools/call', { name: 't', _meta: { 'dev.switchyard/idempotency-key': '' } }));
    expect(empty.at(-1)).toMatchObject({ error: { message: expect.stringMatching(/other side closed/) } });

    const note = 'notifications/roots/list_changed';
    let notes = 0;
    await untilDropped(note, async () => {
      bridge.line(JSON.stringify({ jsonrpc: '2.0', method: note }));
      notes++;
      await expect.poll(() => count(note) >= notes + (drop === undefined ? 1 : 0), { timeout: 5000, interval: 5 }).toBe(true);
    });
    expect(count(note)).toBe(notes + 1);
  });
});
