import { EventEmitter } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { AdminEvents } from '../../src/downstream/admin-events.js';
import { silentLogger } from '../../src/log.js';
import type { AuditEvent } from '../../src/observe.js';

let server: Server | undefined;
let feed: AdminEvents | undefined;
afterEach(async () => {
  feed?.close();
  await new Promise((r) => server?.close(r) ?? r(undefined));
});

async function viewer(port: number): Promise<{ ws: WebSocket; got: unknown[] }> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/admin/events`);
  const got: unknown[] = [];
  ws.on('message', (d) => got.push(JSON.parse(String(d))));
  await new Promise((r, j) => ws.once('open', r).once('error', j));
  return { ws, got };
}

const until = async (ok: () => boolean): Promise<void> => {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 5));
  expect(ok()).toBe(true);
};

describe('/admin/events', () => {
  it("listens for finished requests only while a viewer is connected (the hub builds no event for nobody)", async () => {
    const events = new EventEmitter();
    feed = new AdminEvents(events, () => ({ servers: [] }), silentLogger);
    server = createServer();
    feed.attach(server, () => ({ status: 200 }));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    expect(events.listenerCount('audit')).toBe(0);

    const a = await viewer(port);
    const b = await viewer(port);
    await until(() => a.got.length === 1 && b.got.length === 1); // the hello frames
    expect(events.listenerCount('audit')).toBe(1);
    const ev = { type: 'audit', method: 'tools/call', outcome: 'ok' } as AuditEvent;
    events.emit('audit', ev);
    await until(() => a.got.length === 2 && b.got.length === 2);
    expect(b.got[1]).toEqual(ev);

    a.ws.close();
    await until(() => feed!.viewers === 1);
    expect(events.listenerCount('audit')).toBe(1); // b still watches
    b.ws.close();
    await until(() => feed!.viewers === 0);
    await until(() => events.listenerCount('audit') === 0);

    const c = await viewer(port);
    await until(() => events.listenerCount('audit') === 1);
    events.emit('audit', ev);
    await until(() => c.got.length === 2);
    c.ws.close();
  });
});
