/**
 * Attack table, availability row: names and URIs that a backtracking matcher would chew on for
 * minutes. Upstreams publish resource templates of many runs; a client reads long URIs that
 * nearly match them, and calls a long tool name under a rate-limit glob of many stars. Each
 * is answered, and the hub goes on serving. (The matchers themselves: name-matching.test.ts.)
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernCall, sleep, waitForReady, waitForRows, type LegacyRaw } from './ledger-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
let hub: HubProcess;
let db: string;
let legacy: LegacyRaw;
let n = 0;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-redos-'));
  hub = await startHub(
    {
      policy: { rateLimit: { tools: { '*_*_*_*_*_*_*_x': { burst: 100, perSecond: 1 } } } },
      servers: {
        runs: nodeServer(MUTABLE, [], { TEMPLATE: 'evil://{+a}{+b}{+c}{+d}{+e}{+f}z', DOC_URI: 'evil://doc' }),
        segs: nodeServer(MUTABLE, [], { TEMPLATE: 'seg://{a}-{b}-{c}-{d}-{e}-{f}z', DOC_URI: 'seg://doc' }),
      },
    },
    { dir },
  );
  db = join(dir, 'ledger.db');
  await waitForReady(hub.url, ['runs', 'segs']);
  legacy = await legacySession(hub.url, 'redos-legacy');
}, 30_000);

afterAll(async () => {
  // A stalled hub does not hear SIGTERM: its event loop never gets there.
  if (hub) await Promise.race([hub.stop(), sleep(10_000).then(() => hub.proc.kill('SIGKILL'))]);
});

/** The hub still answers, and quickly: a list served from its cache. */
async function stillServing(): Promise<void> {
  const list = await modernCall(hub.url, `alive-${++n}`, 'tools/list', {}, { signal: AbortSignal.timeout(5_000) });
  expect(list.body?.result).toMatchObject({ tools: expect.any(Array) });
}

describe('hostile names and templates', () => {
  it('a long URI that templates of many runs nearly match is not found, and the hub goes on', async () => {
    for (const uri of [`evil://${'a'.repeat(5_000)}`, `seg://${'a-'.repeat(2_500)}`]) {
      const answer = await modernCall(hub.url, `read-${++n}`, 'resources/read', { uri }, { signal: AbortSignal.timeout(10_000) });
      expect(answer.body?.error).toMatchObject({ code: -32602 });
      await stillServing();
    }
  });

  it('a URI a template matches still goes to its server', async () => {
    for (const [uri, server] of [
      ['evil://x/y?z', 'runs'],
      ['seg://a-b-c-d-e-fz', 'segs'],
    ]) {
      const answer = await modernCall(hub.url, `routed-${++n}`, 'resources/read', { uri });
      // The upstream's own not-found (it has no such resource), so the read reached it.
      expect(answer.body?.error).toMatchObject({ code: -32602, data: { uri } });
      const rows = await waitForRows(db, { tool: uri });
      expect(rows).toEqual([expect.objectContaining({ server })]);
    }
  });

  it('a long tool name under a rate-limit glob of many stars is refused as unknown, and the hub goes on', async () => {
    // A legacy client: the name travels in the body only, with no header to bound it.
    const answer = await legacy.call(`long-name-${++n}`, 'tools/call', { name: '_'.repeat(50_000), arguments: {} });
    expect(answer.body?.error ?? answer.body?.result).toBeDefined();
    expect(JSON.stringify(answer.body)).toMatch(/[Uu]nknown tool/);
    await stillServing();
  });
});
