/**
 * Resource-not-found on the forwarded path: an upstream of either era answers a read of a URI
 * its template matches with its own era's error (-32002, or -32602 with data.uri), and each
 * client hears its own era's, whatever the upstream spoke; the ledger row holds the code the
 * client saw. (The hub's own not-found, for a URI no server owns, is in ledger-outcomes.)
 *
 * With the SDKs as peers (an SDK v2 upstream, an SDK v1 legacy client, an SDK v2 modern client):
 * a -32602 is a not-found only in its 2026 form, data {uri} and nothing else (as the SDK reads
 * it); any other -32602 (one whose data says more, as the SDK's invalid URI's {uri, reason}, or one with no data) is
 * invalid params, which both eras have, and reaches either client as the upstream said it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, ResourceNotFoundError, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernCall, SDK2, waitForReady, waitForRows, type LegacyRaw } from './ledger-helpers.js';

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
        sdk2: nodeServer(SDK2),
      },
    },
    { dir },
  );
  db = join(dir, 'ledger.db');
  await waitForReady(hub.url, ['old', 'new', 'sdk2']);
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

describe('resource errors between the SDKs, through the hub', () => {
  let v1: ClientV1;
  let v2: ClientV2;

  beforeAll(async () => {
    v1 = new ClientV1({ name: 'notfound-v1', version: '1.0.0' });
    await v1.connect(new TransportV1(new URL(hub.url)));
    v2 = new ClientV2({ name: 'notfound-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await v2.connect(new TransportV2(new URL(hub.url)));
    expect(v2.getProtocolEra()).toBe('modern');
  });
  afterAll(async () => {
    await v1?.close();
    await v2?.close();
  });

  /** The error a read ends with, as the client's SDK gives it. */
  async function failed(read: Promise<unknown>): Promise<{ code?: unknown; data?: unknown; message?: unknown }> {
    const err = await read.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    return err as { code?: unknown; data?: unknown };
  }

  it("an SDK v2 upstream's miss is -32002 naming the URI for the v1 client, and a ResourceNotFoundError for the v2 client", async () => {
    const uri = 'sdk2://item/missing';
    expect(await failed(v1.readResource({ uri }))).toMatchObject({ code: -32002, data: { uri } });
    const modern = await failed(v2.readResource({ uri }));
    expect(modern).toBeInstanceOf(ResourceNotFoundError);
    expect(modern).toMatchObject({ code: -32602, data: { uri } });
  });

  it("a legacy upstream's -32002 is a ResourceNotFoundError for the v2 client", async () => {
    const uri = 'oldres://absent';
    const modern = await failed(v2.readResource({ uri }));
    expect(modern).toBeInstanceOf(ResourceNotFoundError);
    expect(modern).toMatchObject({ code: -32602, data: { uri } });
  });

  it("an SDK v2 upstream's -32602 whose data says more than the URI ({uri, reason}) is invalid params for both clients, its data unchanged", async () => {
    const uri = 'sdk2://item/malformed';
    const data = { uri, reason: 'invalid_uri' };
    expect(await failed(v1.readResource({ uri }))).toMatchObject({ code: -32602, data });
    const modern = await failed(v2.readResource({ uri }));
    expect(modern).not.toBeInstanceOf(ResourceNotFoundError);
    expect(modern).toMatchObject({ code: -32602, data });
  });

  it("an SDK v2 upstream's -32602 with no data is invalid params for both clients, not a not-found", async () => {
    const uri = 'sdk2://item/refused';
    const legacyErr = await failed(v1.readResource({ uri }));
    expect(legacyErr).toMatchObject({ code: -32602 });
    expect(String(legacyErr.message)).toContain('item refused may not be read');
    const modern = await failed(v2.readResource({ uri }));
    expect(modern).not.toBeInstanceOf(ResourceNotFoundError);
    expect(modern).toMatchObject({ code: -32602 });
    expect(String(modern.message)).toContain('item refused may not be read');
  });
});
