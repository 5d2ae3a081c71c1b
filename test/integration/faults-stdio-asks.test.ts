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
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';

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

/**
 * With authentication on, a client's notifications/roots/list_changed reaches a legacy server
 * only on its principal's own connection (here processPerPrincipal), and the server's asks that
 * follow, outside any call, go to that client, once however many the server sends. A server's
 * shared connection is not told, even while no one else has used it: the roots it would keep
 * act for whoever calls next.
 */
describe("a client's roots/list_changed", () => {
  const KEYS = { alice: 'sk-roots-alice-0123456789', bob: 'sk-roots-bob-0123456789' };
  let authHub: HubProcess;
  const heardFile = join(mkdtempSync(join(tmpdir(), 'switchyard-roots-')), 'heard.json');

  beforeAll(async () => {
    authHub = await startHub({
      auth: { apiKeys: Object.entries(KEYS).map(([principal, key]) => ({ principal, sha256: sha256Hex(key) })) },
      servers: {
        // A process writes what it heard to HEARD_FILE once told something (only alice's is).
        own: { ...nodeServer(`${FAULTS}/stdio-asker.mjs`, [], { ROOTS_ASKS: '40', HEARD_FILE: heardFile }), processPerPrincipal: true, timeoutMs: 20_000 },
        shared: { ...nodeServer(`${FAULTS}/stdio-asker.mjs`), timeoutMs: 20_000 },
      },
    });
    await waitForReadyWith(authHub.url, ['own', 'shared'], KEYS.alice);
  }, 60_000);
  afterAll(async () => void (await authHub?.stop()));

  type Heard = { notified: number; ok: number; errors: number; roots: string[] };
  async function user(who: keyof typeof KEYS): Promise<{ client: V1Client; asked: () => number; heard: (server: string) => Promise<Heard> }> {
    const client = new V1Client({ name: `roots-${who}`, version: '1.0.0' }, { capabilities: { roots: { listChanged: true } } });
    let asked = 0;
    client.setRequestHandler(ListRootsRequestSchema, async () => {
      asked++;
      await new Promise((r) => setTimeout(r, 100));
      return { roots: [{ uri: `file:///home/${who}/${asked}` }] };
    });
    await client.connect(new V1Transport(new URL(authHub.url), { requestInit: { headers: { authorization: `Bearer ${KEYS[who]}` } } }));
    const heard = async (server: string) => JSON.parse((((await client.callTool({ name: `${server}__roots`, arguments: {} })).content as { text: string }[])[0]!.text)) as Heard;
    return { client, asked: () => asked, heard };
  }

  it("is passed on on the principal's own connection, its asks answered by that client at once; not on a shared one", async () => {
    const alice = await user('alice');
    const bob = await user('bob');
    try {
      expect(await alice.heard('own')).toEqual({ notified: 0, ok: 0, errors: 0, roots: [] });
      expect((await alice.heard('shared')).notified).toBe(0);
      await alice.client.sendRootsListChanged();
      // Looked at in its file, with no call in flight meanwhile: a legacy stdio server's request
      // says nothing of what it belongs to, and a call in flight alone would be taken for its asker.
      const end = Date.now() + 10_000;
      const read = (): Heard | undefined => (existsSync(heardFile) ? (JSON.parse(readFileSync(heardFile, 'utf8')) as Heard) : undefined);
      while (Date.now() < end && (read()?.ok ?? 0) + (read()?.errors ?? 0) < 40) await new Promise((r) => setTimeout(r, 20));
      const h = await alice.heard('own');
      // Forty asks at once, one question to the client, every ask answered with its roots.
      expect(h, JSON.stringify(h)).toEqual({ notified: 1, ok: 40, errors: 0, roots: ['file:///home/alice/1'] });
      expect(alice.asked()).toBe(1);
      // The shared process, which only alice has used, heard nothing; nor did bob's own.
      expect((await alice.heard('shared')).notified).toBe(0);
      expect((await bob.heard('own')).notified).toBe(0);
      expect(bob.asked()).toBe(0);
    } finally {
      await alice.client.close();
      await bob.client.close();
    }
  }, 30_000);
});
