/** StdioServer once stopped, in process: a fake endpoint, stdin and a stdout whose reader is slow. */
import { PassThrough, Writable } from 'node:stream';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import { StdioServer } from '../../src/downstream/stdio-server.js';
import type { Endpoint } from '../../src/downstream/endpoint.js';
import type { Exchange } from '../../src/downstream/exchange.js';
import type { Logger } from '../../src/log.js';
import { RpcError } from '../../src/protocol/errors.js';
import { errorResponse, resultResponse, type Classified, type Request } from '../../src/protocol/jsonrpc.js';

/** A StdioServer over `input` and `output`, logging nowhere; its endpoint serves messages with `message` and refuses with `refuseUnserved` (default: nothing). */
function serverOf(
  input: PassThrough,
  output: Writable,
  maxLineBytes: number,
  message: (c: Classified, ex: Exchange) => Promise<void>,
  refuseUnserved: (msg: Request, ex: Exchange) => Promise<void> = async () => undefined,
): StdioServer {
  const endpoint = { message, refuseUnserved, batchRefusal: () => null } as unknown as Endpoint;
  return new StdioServer(endpoint, input, output as unknown as NodeJS.WriteStream, pino({ level: 'silent' }) as unknown as Logger, { maxLineBytes });
}

async function until(cond: () => boolean, what: string): Promise<void> {
  for (const end = Date.now() + 3_000; !cond(); await new Promise((r) => setTimeout(r, 5))) if (Date.now() > end) throw new Error(`timed out: ${what}`);
}

describe('StdioServer stopped', () => {
  // stdin was paused while the client did not read stdout; stop() no longer pauses it (a request
  // sent once stopped is answered), but a 'drain' after the stop did not resume it: unread.
  it('reads stdin again when stdout drains after the stop (paused while the client was behind): a request then is answered, refused', async () => {
    const input = new PassThrough();
    const written: string[] = [];
    const held: (() => void)[] = [];
    // Takes a write only when told (held): the client is not reading.
    const output = new Writable({
      highWaterMark: 16,
      write(chunk: Buffer, _enc, done) {
        written.push(chunk.toString());
        held.push(done);
      },
    });
    const refused: unknown[] = [];
    const server = serverOf(
      input,
      output,
      1 << 20,
      async (c, ex) => {
        if (c.kind === 'request') ex.reply(resultResponse(c.msg.id, { pad: 'x'.repeat(100) }));
      },
      async (msg, ex) => {
        refused.push(msg.id);
        ex.reply(errorResponse(msg.id, new RpcError(-32603, 'the hub is shutting down')));
      },
    );
    void server.run();
    input.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) + '\n');
    await until(() => input.isPaused(), 'stdin paused for the full stdout');
    await server.stop();
    // The client reads what was waiting, then sends a request.
    while (held.length) held.shift()!();
    input.write(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) + '\n');
    await until(() => refused.length === 1, 'the request after the stop refused');
    expect(refused).toEqual([2]);
    await until(() => written.some((l) => l.includes('"id":2')), 'its answer written');
    while (held.length) held.shift()!();
  });
});

describe('StdioServer holding lines behind an initialize', () => {
  // Every line a client wrote behind an initialize waiting for slow servers was held in memory,
  // stdin read on without bound (75 MB written in 8 s took a hub past 600 MB).
  it('reads stdin no further while the lines held pass 1 MiB, and again once the initialize is answered; every held request then served in order', async () => {
    const input = new PassThrough();
    const written: string[] = [];
    const output = new Writable({
      write(chunk: Buffer, _enc, done) {
        written.push(chunk.toString());
        done();
      },
    });
    let answerInit: () => void = () => undefined;
    const served: unknown[] = [];
    const server = serverOf(input, output, 4096, async (c, ex) => {
      if (c.kind !== 'request') return;
      if (c.msg.method === 'initialize') await new Promise<void>((res) => (answerInit = res));
      else served.push(c.msg.id);
      ex.reply(resultResponse(c.msg.id, {}));
    });
    void server.run();
    input.write(JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'c', version: '1' } } }) + '\n');
    const pad = 'x'.repeat(1000);
    const lines = Array.from({ length: 1500 }, (_, i) => JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping', params: { pad } }) + '\n');
    input.write(lines.join(''));
    await until(() => input.isPaused(), 'stdin paused past 1 MiB held');
    expect(served).toEqual([]);
    answerInit();
    await until(() => served.length === 1500, 'every held request served');
    expect(input.isPaused()).toBe(false);
    expect(served).toEqual(lines.map((_, i) => i));
    await server.stop();
  });
});

describe('StdioServer draining, when the wall clock is stepped (NTP, a laptop resumed)', () => {
  it('stops when its drain time is up on the monotonic clock: an hour back does not keep it waiting that hour', async () => {
    const input = new PassThrough();
    const output = new Writable({ write: (_c, _e, done) => done() });
    let answer: () => void = () => undefined;
    // A call that is still running when the drain time is up.
    const server = serverOf(input, output, 4096, async (c, ex) => {
      if (c.kind !== 'request') return;
      await new Promise<void>((res) => (answer = res));
      ex.reply(resultResponse(c.msg.id, {}));
    });
    void server.run();
    input.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) + '\n');
    await until(() => (server as unknown as { pending: Set<unknown> }).pending.size === 1, 'the call running');
    // Only Date: the drain's timer is real (and \`until\` polls on it: Date stands still from here).
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      void server.drain(200);
      vi.setSystemTime(Date.now() - 3_600_000);
      const stopped = (): boolean => (server as unknown as { stopped: boolean }).stopped;
      for (const end = performance.now() + 3_000; !stopped() && performance.now() < end; ) await new Promise((r) => setTimeout(r, 10));
      // Before, its deadline was on the wall clock: it waited an hour past its 200 ms.
      expect(stopped()).toBe(true);
    } finally {
      vi.useRealTimers();
      answer();
      await server.stop();
    }
  });
});
