/**
 * Resource-not-found on the forwarded path: an upstream of either era answers a read of a URI
 * its template matches with its own era's error (-32002, or -32602 with data.uri), and each
 * client hears its own era's, whatever the upstream spoke; the ledger row holds the code the
 * client saw. (The hub's own not-found, for a URI no server owns, is in ledger-outcomes.)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernCall, waitForReady, waitForRows, type LegacyRaw } from './ledger-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
let hub: HubProcess;
let db: string;
let legacy: LegacyRaw;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-notfound-'));
  hub = await startHub(
    {
      servers: {
        old: nodeServer(MUTABLE, [], { ERA: 'legacy', TEMPLATE: 'oldres://{id}', DOC_URI: 'oldres://here' }),
        new: nodeServer(MUTABLE, [], { ERA: 'modern', TEMPLATE: 'newres://{id}', DOC_URI: 'newres://here' }),
      },
    },
    { dir },
  );
  db = join(dir, 'ledger.db');
  await waitForReady(hub.url, ['old', 'new']);
  legacy = await legacySession(hub.url, 'notfound-legacy');
}, 30_000);

afterAll(async () => {
  await hub?.stop();
});

describe('resource not found, forwarded from an upstream', () => {
  const cases = [
    { client: 'modern', uri: 'oldres://missing', code: -32602 },
    { client: 'modern', uri: 'newres://missing', code: -32602 },
    { client: 'legacy', uri: 'oldres://gone', code: -32002 },
    { client: 'legacy', uri: 'newres://gone', code: -32002 },
  ] as const;

  for (const c of cases) {
    it(`a ${c.client} client reading ${c.uri} (a ${c.uri.startsWith('old') ? 'legacy' : 'modern'} upstream) gets ${c.code}, and so does its row`, async () => {
      const id = `${c.client}-${c.uri}`;
      const answer = c.client === 'modern' ? await modernCall(hub.url, id, 'resources/read', { uri: c.uri }) : await legacy.call(id, 'resources/read', { uri: c.uri });
      expect(answer.body?.error).toMatchObject({ code: c.code });
      // A modern client learns which URI was not found (the 2026 form of the error).
      if (c.client === 'modern') expect(answer.body?.error).toMatchObject({ data: { uri: c.uri } });
      const rows = await waitForRows(db, { tool: c.uri });
      expect(rows).toEqual([expect.objectContaining({ requestId: id, method: 'resources/read', outcome: 'rpc_error', errorCode: c.code, server: c.uri.startsWith('old') ? 'old' : 'new' })]);
    });
  }

  it('a resource that exists is read from either upstream by either client', async () => {
    const m = await modernCall(hub.url, 'ok-m', 'resources/read', { uri: 'oldres://here' });
    expect(m.body?.result).toMatchObject({ contents: [{ uri: 'oldres://here' }] });
    const l = await legacy.call('ok-l', 'resources/read', { uri: 'newres://here' });
    expect(l.body?.result).toMatchObject({ contents: [{ uri: 'newres://here' }] });
  });
});
