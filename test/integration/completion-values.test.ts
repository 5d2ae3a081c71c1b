/**
 * A completion holds at most 100 values (both eras' schemas; the official v2 client refuses a
 * longer one whole): an upstream's longer answer reaches clients as its first 100, with
 * `hasMore` and the `total` it had. Real hub, a raw modern stdio upstream, raw HTTP of both eras
 * and the official v2 client.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernPost, waitForReady } from '../helpers/wire.js';

describe('completion values', () => {
  let hub: HubProcess;
  beforeAll(async () => {
    hub = await startHub({ servers: { q: nodeServer('test/fixtures/quirks/modern.mjs', [], { QUIRK_COMPLETE: '1' }) } });
    await waitForReady(hub.url, ['q']);
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const params = (value: string) => ({ ref: { type: 'ref/prompt', name: 'q__p' }, argument: { name: 'a', value } });
  const first100 = Array.from({ length: 100 }, (_, i) => `v${i}`);

  it('past 100 are cut to the first 100, with hasMore and the total, for both eras', async () => {
    const m = await modernPost(hub.url, 'c1', 'completion/complete', params('many'));
    expect(m.body?.result?.completion, m.text).toEqual({ values: first100, hasMore: true, total: 150 });
    const s = await legacySession(hub.url);
    const l = await s.request(1, 'completion/complete', params('many'));
    expect(l.body?.result?.completion, l.text).toEqual({ values: first100, hasMore: true, total: 150 });
    // A short one passes as it came.
    expect((await modernPost(hub.url, 'c2', 'completion/complete', params('ab'))).body?.result?.completion).toEqual({ values: ['ab1', 'ab2'] });
  });

  it('the official v2 client takes the answer', async () => {
    const c = new Client({ name: 'completion-values', version: '1.0.0' }, { versionNegotiation: { mode: 'auto' } });
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      const r = await c.complete({ ref: { type: 'ref/prompt', name: 'q__p' }, argument: { name: 'a', value: 'many' } });
      expect(r.completion.values).toHaveLength(100);
      expect(r.completion.hasMore).toBe(true);
    } finally {
      await c.close();
    }
  });
});
