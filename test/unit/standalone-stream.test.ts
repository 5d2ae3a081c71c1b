/**
 * The legacy standalone GET stream (src/upstream/standalone-stream.ts) opened again with nothing
 * to resume from says so to its upstream (host.unheard) once a new stream is open, once per gap,
 * however many attempts it takes. Against a real loopback server through the real HttpClient;
 * the host stands for the upstream and records what it is told.
 */
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { LEGACY } from '../../src/protocol/era.js';
import { HttpClient } from '../../src/transport/http-client.js';
import { StandaloneStream, type StandaloneStreamHost } from '../../src/upstream/standalone-stream.js';

const servers: http.Server[] = [];
const streams: StandaloneStream[] = [];
const clients: HttpClient[] = [];
afterEach(() => {
  for (const s of streams.splice(0)) s.stop();
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    s.close();
  }
});

/** A server answering its n-th GET with `answers[n]` (the last one for any after). */
async function serve(answers: ((res: ServerResponse) => void)[]): Promise<{ url: string; gets: () => number }> {
  let gets = 0;
  const s = http.createServer((req, res) => {
    const answer = answers[Math.min(gets, answers.length - 1)];
    gets++;
    answer(res);
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}/mcp`, gets: () => gets };
}

const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
const event = (res: ServerResponse) => res.write(`data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x' } })}\n\n`);
/** Opens, says something (so the wait before the next is the shortest, 1 s), and ends. */
const endsAfterAnEvent = (res: ServerResponse) => {
  sse(res);
  event(res);
  res.end();
};
const unwell = (res: ServerResponse) => res.writeHead(503, { 'content-type': 'text/plain' }).end('busy');
const staysOpen = (res: ServerResponse) => sse(res);
/** Opens, and is cut by the network (its socket destroyed), never ended by the server. */
const cutWhileOpen = (res: ServerResponse) => {
  sse(res);
  setTimeout(() => res.socket?.destroy(), 100);
};
const gone = (res: ServerResponse) => res.writeHead(404, { 'content-type': 'text/plain' }).end('no session');
/** A refusal whose body comes well after its head: still no open stream. */
const slowlyUnwell = (res: ServerResponse) => {
  res.writeHead(503, { 'content-type': 'text/plain' }).flushHeaders();
  setTimeout(() => res.end('busy'), 300);
};

/** A stream on session s1, and what its host was told: at which GET (the count then) each unheard came. */
function stream(url: string, gets: () => number): { s: StandaloneStream; unheardAt: number[]; gaps: () => number; renewals: () => number; told: string[] } {
  const http = new HttpClient({ url, headers: {}, maxFrameBytes: 1 << 20, log: silentLogger });
  clients.push(http);
  const unheardAt: number[] = [];
  let gaps = 0;
  let renewals = 0;
  const told: string[] = [];
  const host: StandaloneStreamHost = {
    http,
    log: silentLogger,
    session: 's1',
    headers: { 'mcp-session-id': 's1' },
    closed: false,
    era: LEGACY,
    state: 'ready',
    heard: () => undefined,
    gap: () => {
      gaps++;
      told.push('gap');
    },
    unheard: () => {
      unheardAt.push(gets());
      told.push('unheard');
    },
    renew: () => {
      renewals++;
      return Promise.resolve();
    },
    foundDown: () => undefined,
  };
  const s = new StandaloneStream(host);
  streams.push(s);
  return { s, unheardAt, gaps: () => gaps, renewals: () => renewals, told };
}

describe('StandaloneStream', () => {
  it('a stream that was open, ended with nothing to resume from, then refused once (503): said unheard once, when the third GET is open', async () => {
    const srv = await serve([endsAfterAnEvent, unwell, staysOpen]);
    const t = stream(srv.url, srv.gets);
    t.s.open();
    await expect.poll(() => t.unheardAt, { timeout: 10_000, interval: 20 }).toEqual([3]);
    // Both reopenings were gaps for the lists, and so was the new stream's opening: lists
    // fetched while it was awaited were taken as if a change would be heard.
    expect(t.told).toEqual(['gap', 'gap', 'gap', 'unheard']);
  }, 20_000);

  it('a session whose stream never opened lost nothing to say: refused (503), then open (no tell), then ended and open again (one tell)', async () => {
    const srv = await serve([unwell, endsAfterAnEvent, staysOpen]);
    const t = stream(srv.url, srv.gets);
    t.s.open();
    await expect.poll(() => t.unheardAt, { timeout: 10_000, interval: 20 }).toEqual([3]);
  }, 20_000);

  it('a refusal whose body comes after its head is no open stream: said unheard once, when the stream after it is open', async () => {
    const srv = await serve([endsAfterAnEvent, slowlyUnwell, staysOpen]);
    const t = stream(srv.url, srv.gets);
    t.s.open();
    await expect.poll(() => t.unheardAt, { timeout: 10_000, interval: 20 }).toEqual([3]);
  }, 20_000);

  it('a session whose open stream was cut by the network, then answered 404, is gone: renewed', async () => {
    const srv = await serve([cutWhileOpen, gone]);
    const t = stream(srv.url, srv.gets);
    t.s.open();
    await expect.poll(() => t.renewals(), { timeout: 10_000, interval: 20 }).toBe(1);
    expect(srv.gets()).toBe(2);
  }, 20_000);

  it("a new session's stream (resetFailures) says unheard once it is open, after a refusal: its subscriptions were made again before it", async () => {
    const srv = await serve([unwell, staysOpen]);
    const t = stream(srv.url, srv.gets);
    t.s.resetFailures();
    t.s.open();
    await expect.poll(() => t.unheardAt, { timeout: 10_000, interval: 20 }).toEqual([2]);
  }, 20_000);
});
