/** The tests' own way to hold a streaming answer open without a reference to it (test/helpers/wire.ts). */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { keepOpen } from '../helpers/wire.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Opens one never-ending answer, drops the Response, collects garbage; says whether the server saw it close. */
async function closedAfterGc(hold: (res: Response) => void): Promise<boolean> {
  let answer: ServerResponse | undefined;
  let closed = false;
  const server = createServer((_req, res) => {
    answer = res;
    res.on('close', () => void (closed = true));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': open\n\n');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const ac = new AbortController();
  try {
    await (async () => {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { signal: ac.signal });
      hold(res);
    })();
    for (let i = 0; i < 20 && !closed; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 25));
    }
    return closed;
  } finally {
    ac.abort();
    answer?.destroy();
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

describe('keepOpen()', () => {
  it('a kept answer stays open through garbage collection; one left alone is cancelled by fetch', async () => {
    expect(await closedAfterGc(keepOpen)).toBe(false);
    expect(await closedAfterGc(() => undefined)).toBe(true);
  });
});
