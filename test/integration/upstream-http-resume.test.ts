/**
 * A legacy (2025-11-25) HTTP server doing SSE polling (digest §6.2): after an event id it may
 * end the connection of a stream and keep the stream; the client must wait the `retry:` it
 * named and reconnect with GET + `Last-Event-ID`. The peer is the SDK v1 server with an event
 * store (test/fixtures/servers/sdk1-server.mjs, SSE_RETRY_MS), behind the real hub.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHttpFixture, type HttpFixture } from '../helpers/http-fixture.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, modernPost, waitForReady, type Json } from '../helpers/wire.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';

describe('legacy HTTP upstream that ends its streams early (SSE polling)', () => {
  let up: HttpFixture;
  let hub: HubProcess;
  beforeAll(async () => {
    up = await startHttpFixture(SDK1, { SSE_RETRY_MS: '200' });
    // Lists kept long: a tool shows up only when the hub is told of it.
    hub = await startHub({ servers: { p: { url: up.url, cacheTtlMs: 600_000 } } });
    await waitForReady(hub.url, ['p']);
  }, 40_000);
  afterAll(async () => {
    await hub?.stop();
    await up?.stop();
  });

  const names = async (): Promise<string[]> => (((await modernPost(hub.url, 'l', 'tools/list')).body?.result?.tools as Json[] | undefined) ?? []).map((t) => String(t.name));

  it('a call whose answer stream ended before the response gets the response from the resumed stream', async () => {
    expect(await names()).toContain('p__poll_answer');
    const started = Date.now();
    const r = await modernPost(hub.url, 'resume-1', 'tools/call', { name: 'p__poll_answer', arguments: { ms: 300 } });
    expect(r.body?.error).toBeUndefined();
    expect(firstText(r.body?.result)).toBe('answered 300 ms after the stream ended');
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    // One call, one row, answered.
    await expect
      .poll(() => {
        const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
        try {
          return db.prepare(`SELECT outcome FROM audit WHERE request_id = 'resume-1'`).all();
        } finally {
          db.close();
        }
      })
      .toEqual([{ outcome: 'ok' }]);
  });

  it('a standalone stream ended by the server is resumed from its last event: what was sent meanwhile arrives', async () => {
    const r = await modernPost(hub.url, 'drop-1', 'tools/call', { name: 'p__drop_get_stream', arguments: { name: 'late' } });
    expect(firstText(r.body?.result)).toBe('dropped');
    // late_first came on the open stream; late was announced while the hub was away.
    await expect.poll(names, { timeout: 8000, interval: 100 }).toEqual(expect.arrayContaining(['p__late_first', 'p__late']));
  });

  it('a session that ends while no call is made is renewed from the GET stream (404), and its notifications arrive', async () => {
    const r = await modernPost(hub.url, 'end-1', 'tools/call', { name: 'p__end_sessions', arguments: { add: 'after_end', addMs: 2500 } });
    expect(firstText(r.body?.result)).toBe('ending');
    // No call goes upstream from here (lists are served from the hub's cache): only a hub that
    // noticed the session's end on its GET stream has a session for the tool to be added to.
    await expect.poll(names, { timeout: 10_000, interval: 200 }).toContain('p__after_end');
  }, 20_000);
});
