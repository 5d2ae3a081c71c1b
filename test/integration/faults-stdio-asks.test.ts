/**
 * Fault suite: a stdio server that asks the client many questions at once in one call (a loop
 * gone wrong). The hub relays a bounded number and refuses the rest to the server at once. Real
 * hub, fixture stdio-asker.mjs over real pipes, a v1 SDK client that answers roots/list slowly.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as V1Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as V1Transport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { FAULTS, rowsFor, waitForState } from './faults-helpers.js';
import { join } from 'node:path';

let hub: HubProcess;

beforeAll(async () => {
  hub = await startHub({ servers: { asker: { ...nodeServer(`${FAULTS}/stdio-asker.mjs`), timeoutMs: 20_000 } } });
  await waitForState(hub.url, 'asker', ['ready']);
}, 60_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

describe('a stdio server asking its client many questions at once', () => {
  it('has 32 of them relayed to the client, and the rest refused to it at once', async () => {
    const client = new V1Client({ name: 'slow-roots', version: '1.0.0' }, { capabilities: { roots: {} } });
    let asked = 0;
    let open = 0;
    let mostOpen = 0;
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      mostOpen = Math.max(mostOpen, ++open);
      await new Promise((r) => setTimeout(r, 300));
      open--;
      return { roots: [{ uri: 'file:///tmp', name: 'tmp' }] };
    });
    await client.connect(new V1Transport(new URL(hub.url)));
    try {
      const r = await client.callTool({ name: 'asker__ask', arguments: { n: 100 } }, undefined, { timeout: 30_000 });
      const said = JSON.parse((r.content as { text: string }[])[0]!.text) as { ok: number; errors: number; firstError?: string };
      expect(said).toEqual({ ok: 32, errors: 68, firstError: 'too many requests to the client at once (32 open for this call)' });
      expect(asked).toBe(32);
      expect(mostOpen).toBe(32);
      const [row] = await rowsFor(join(hub.dir, 'ledger.db'), 'asker__ask');
      expect(row.outcome).toBe('ok');
    } finally {
      await client.close();
    }
  }, 60_000);
});
