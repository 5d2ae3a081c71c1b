/**
 * A server that declares `resources` but serves no resources/templates/list (SDK v1's and v2's
 * low-level Server answer -32601 for a method without a handler; many servers list and read
 * resources and have no templates). Directly, a client asking it for templates hears -32601 and
 * goes on; through the hub its templates are none, not a list that failed: no `listError` on
 * /healthz, no warning, and a modern client's templates list is not cut to the 5 s a list
 * failing gets. Its resources are listed and read as ever. Both SDK clients, both server eras.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as TransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, modernPost, waitForReady, type Json } from '../helpers/wire.js';

const FIXTURE = 'test/fixtures/servers/no-templates.mjs';
let hub: HubProcess;
let asked: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-no-templates-'));
  asked = join(dir, 'templates-asked.log');
  writeFileSync(asked, '');
  hub = await startHub(
    {
      servers: {
        old: nodeServer(FIXTURE, [], { TEMPLATE_LOG: asked }),
        new: nodeServer(FIXTURE, [], { SDK: '2', TEMPLATE_LOG: asked }),
      },
    },
    { dir },
  );
  const ready = await waitForReady(hub.url, ['old', 'new']);
  expect(ready.servers.map((s) => [s.id, s.era])).toEqual([
    ['old', '2025-11-25'],
    ['new', '2026-07-28'],
  ]);
}, 30_000);

afterAll(async () => void (await hub?.stop()));

it('lists no templates of a server without resources/templates/list, with no list error, to SDK v1 and v2 clients', async () => {
  const v1 = new ClientV1({ name: 'no-templates-v1', version: '1.0.0' });
  await v1.connect(new TransportV1(new URL(hub.url)));
  const v2 = new ClientV2({ name: 'no-templates-v2', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
  await v2.connect(new TransportV2(new URL(hub.url)));
  try {
    expect(v2.getNegotiatedProtocolVersion()).toBe('2026-07-28');
    for (const c of [v1, v2]) {
      expect((await c.listResourceTemplates()).resourceTemplates).toEqual([]);
      expect((await c.listResources()).resources.map((r) => r.uri)).toEqual(['notes://one', 'notes://two']); // one copy: the other server's is hidden (config order)
      expect((await c.readResource({ uri: 'notes://two' })).contents).toEqual([{ uri: 'notes://two', mimeType: 'text/plain', text: 'second note' }]);
    }
    // Both servers were asked (each answered -32601): what the hub made of that is the point.
    expect(readFileSync(asked, 'utf8').split('\n').filter(Boolean).length).toBeGreaterThanOrEqual(2);
    // A failed list (the old reading) is held 5 s (LACKING_TTL_MS); none failed: the parts' own
    // freshness, the modern server's 0 (no hint on its answer) the smallest.
    const modern = await modernPost(hub.url, 'tpl', 'resources/templates/list');
    expect(modern.body?.result).toMatchObject({ resourceTemplates: [], ttlMs: 0 });
    const servers = (await health(hub.url)).servers as unknown as Json[];
    expect(servers.map((s) => [s.id, s.listError])).toEqual([
      ['old', null],
      ['new', null],
    ]);
    expect(hub.logs.filter((l) => l.includes('list failed'))).toEqual([]);
  } finally {
    await v1.close();
    await v2.close();
  }
}, 30_000);
