/**
 * A completion holds at most 100 values (both eras' schemas; the official v2 client refuses a
 * longer one whole): an upstream's longer answer reaches clients as its first 100, with
 * `hasMore` and the `total` it had. Real hub, a raw modern stdio upstream, raw HTTP of both eras
 * and the official v2 client.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernPost, waitForReady } from '../helpers/wire.js';
import { waitForRows } from './ledger-helpers.js';

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

  it('arguments that are not text, or a required prompt argument left out, are the client\'s -32602 from the hub, for both eras, and audited; the upstream is not asked', async () => {
    const ref = { type: 'ref/prompt', name: 'q__p' };
    const bad: [string, string, Record<string, unknown>, RegExp][] = [
      ['cx1', 'completion/complete', { ref, argument: { name: 'a', value: 5 } }, /argument must be \{name, value\}, both strings/],
      ['cx2', 'completion/complete', { ref }, /argument must be \{name, value\}/],
      ['cx3', 'completion/complete', { ref, argument: { name: 'a', value: 'x' }, context: { arguments: { b: 1 } } }, /context\.arguments\.b must be a string/],
      // A ref name with a "toString" of its own (no primitive for a message to quote): -32602, not -32603 "internal error".
      ['cx4', 'completion/complete', { ref: { type: 'ref/prompt', name: { toString: 1 } }, argument: { name: 'a', value: 'x' } }, /Unknown completion reference: \{"toString":1\}/],
      ['px1', 'prompts/get', { name: 'q__p', arguments: { a: 5 } }, /Invalid params for prompt q__p: arguments\.a must be a string/],
      ['px2', 'prompts/get', { name: 'q__p', arguments: ['a'] }, /arguments must be an object of strings/],
      ['px3', 'prompts/get', { name: 'q__p', arguments: {} }, /Invalid params for prompt q__p: the required argument "a" is missing/],
      ['px4', 'prompts/get', { name: 'q__p' }, /the required argument "a" is missing/],
    ];
    const s = await legacySession(hub.url);
    let n = 10;
    for (const [id, method, p, message] of bad) {
      const m = await modernPost(hub.url, id, method, p);
      expect(m.body?.error, `${id}: ${m.text}`).toMatchObject({ code: -32602, message: expect.stringMatching(message) });
      const l = await s.request(++n, method, p);
      expect(l.body?.error, `${id} (legacy): ${l.text}`).toMatchObject({ code: -32602, message: expect.stringMatching(message) });
    }
    const given = await modernPost(hub.url, 'p-ok', 'prompts/get', { name: 'q__p', arguments: { a: 'x' } });
    expect(given.body?.result?.messages, given.text).toEqual([{ role: 'user', content: { type: 'text', text: 'a=x' } }]);
    // Null arguments are none, as for tools/call: sent as none (an SDK server answers null with -32603).
    const none = await modernPost(hub.url, 'p-null', 'prompts/get', { name: 'q__free', arguments: null });
    expect(none.body?.result?.messages, none.text).toEqual([{ role: 'user', content: { type: 'text', text: 'arguments=undefined' } }]);
    const noContext = await modernPost(hub.url, 'c-null', 'completion/complete', { ref, argument: { name: 'a', value: 'context' }, context: null });
    expect(noContext.body?.result?.completion, noContext.text).toEqual({ values: ['context=undefined'] });
    const noContextArgs = await modernPost(hub.url, 'c-null-args', 'completion/complete', { ref, argument: { name: 'a', value: 'context' }, context: { arguments: null, extra: 1 } });
    expect(noContextArgs.body?.result?.completion, noContextArgs.text).toEqual({ values: ['context={"extra":1}'] });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { 'request-id': 'cx1' });
    expect(rows[0]).toMatchObject({ method: 'completion/complete', outcome: 'rpc_error', errorCode: -32602 });
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
