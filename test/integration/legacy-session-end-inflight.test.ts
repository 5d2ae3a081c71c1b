/**
 * A legacy session that ends while one of its requests is in flight (its client's DELETE here;
 * a revoked credential ends it the same way) still answers that request: 202 is for
 * notifications and responses, and an SDK client that gets it for a request waits for an answer
 * until its own timeout. The request is answered as any request naming an ended session is
 * (404, -32001), and the call upstream is cancelled. Real built hub, SDK v1 client and server.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { queryRows, SDK1 } from './ledger-helpers.js';

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { s: nodeServer(SDK1) } });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a legacy session ended under a request in flight', () => {
  it('answers the request with Session not found at once, and cancels the call', async () => {
    const transport = new StreamableHTTPClientTransport(new URL(hub.url));
    const client = new Client({ name: 'ends-its-session', version: '1' });
    await client.connect(transport);
    try {
      const t0 = Date.now();
      const call = client.callTool({ name: 's__slow', arguments: { ms: 8000 } }, undefined, { timeout: 30_000 }).then(
        () => 'answered',
        (err: Error) => err.message,
      );
      await sleep(500);
      await transport.terminateSession();
      const outcome = await call;
      const took = Date.now() - t0;
      expect(took, outcome).toBeLessThan(5_000);
      expect(outcome).toMatch(/404|Session not found/);
      await expect
        .poll(async () => (await queryRows(join(hub.dir, 'ledger.db'))).find((r) => r.method === 'tools/call' && r.clientName === 'ends-its-session')?.outcome, { timeout: 5_000 })
        .toBe('cancelled');
    } finally {
      await client.close();
    }
  }, 40_000);
});
