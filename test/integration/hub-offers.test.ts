/**
 * Hub.offers, which the endpoint asks at each request of a family (issue #9: it built the union
 * of every server's capabilities per call, O(servers)): it says what currentCapabilities says,
 * for /mcp and for a tool group, for the list families (always offered, without a look at any
 * server) and for the rest (what a shown server offers, or offered when last ready). An
 * in-process hub with real servers; the wire answers too.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Hub } from '../../src/hub.js';
import { silentLogger } from '../../src/log.js';
import type { ServerCapabilities } from '../../src/protocol/types.js';
import { modernPost, waitForReady } from '../helpers/wire.js';

const MUTABLE = join(import.meta.dirname, '../fixtures/catalog/mutable-server.mjs');
const FAMILIES: (keyof ServerCapabilities)[] = ['tools', 'prompts', 'resources', 'logging', 'completions'];

describe('Hub.offers', () => {
  let dir: string;
  let hub: Hub;
  let url: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'switchyard-offers-'));
    const server = (caps: ServerCapabilities) => ({ command: process.execPath, args: [MUTABLE], env: { ERA: 'modern', DISCOVER_CAPS: JSON.stringify(caps) } });
    hub = Hub.create(
      parseConfig(
        {
          ledger: { enabled: false },
          // Group g shows a server of prompts only: no tools, no completions, no logging.
          groups: { g: { servers: ['p'] } },
          servers: { p: server({ prompts: { listChanged: true } }), c: server({ tools: { listChanged: true }, completions: {}, logging: {} }) },
        },
        join(dir, 'hub.config.json'),
        {},
      ),
      silentLogger,
    );
    hub.startUpstreams();
    url = `http://127.0.0.1:${(await hub.listen('127.0.0.1', 0)).port}/mcp`;
    await waitForReady(url, ['p', 'c']);
  }, 30_000);
  afterAll(async () => {
    await hub?.stop(0);
    rmSync(dir, { recursive: true, force: true });
  });

  it('says what currentCapabilities says, for every family, on /mcp and on a group', () => {
    for (const group of [undefined, 'g'])
      for (const family of FAMILIES) expect([group, family, hub.offers(family, group)]).toEqual([group, family, Boolean(hub.currentCapabilities(group)[family])]);
    // The list families whatever the servers shown offer; the rest only where a shown server offers them.
    expect(hub.offers('tools', 'g')).toBe(true);
    expect(hub.offers('resources', 'g')).toBe(true);
    expect(hub.offers('completions', 'g')).toBe(false);
    expect(hub.offers('logging', 'g')).toBe(false);
    expect(hub.offers('completions')).toBe(true);
  });

  it('over the wire: a group whose servers offer no tools still takes a tools/call (unknown tool, not -32601); a family it lacks is -32601', async () => {
    const g = url.replace(/\/mcp$/, '/mcp/g');
    const call = await modernPost(g, 't', 'tools/call', { name: 'c__echo', arguments: {} });
    expect(call.body?.error?.code, call.text).toBe(-32602);
    const complete = await modernPost(g, 'cc', 'completion/complete', { ref: { type: 'ref/prompt', name: 'p__x' }, argument: { name: 'a', value: 'x' } });
    expect(complete.status).toBe(404);
    expect(complete.body?.error?.code, complete.text).toBe(-32601);
  });

  it('a server that goes down counts with what it offered when last ready', async () => {
    await hub.handles.get('c')!.upstream.close();
    await expect.poll(() => hub.health().servers.find((s) => s.id === 'c')?.state, { timeout: 10_000 }).not.toBe('ready');
    for (const family of FAMILIES) expect([family, hub.offers(family)]).toEqual([family, Boolean(hub.currentCapabilities()[family])]);
    expect(hub.offers('completions')).toBe(true);
  });
});
