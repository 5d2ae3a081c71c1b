/**
 * What an afterCall hook does to the result it was given. It is the hook's own copy: a change
 * made to it in place, even one that could not stand in for a result (a BigInt, an
 * input_required turn), has no effect; a returned replacement is checked, and is taken as a
 * copy the plugin cannot change afterwards. A real plugin file loaded by the real built hub, in
 * front of a real stdio upstream.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';
import { exportRows, META_KEY, modernCall, waitForRows, type Json } from './ledger-helpers.js';

let hub: HubProcess;

const PLUGIN = `export default { name: 'res-mutator', afterCall(ctx, result) {
  switch (ctx.arguments.text) {
    case 'bigint-in-place': result.content[0].n = 10n; return;
    case 'mrtr-in-place': result.resultType = 'input_required'; delete result.content; return;
    case 'bigint-returned': return { content: [{ type: 'text', text: 'n', n: 10n }] };
    case 'edited-and-returned': result.content[0].text += '!'; return result;
    case 'changed-after-return': {
      const r = { content: [{ type: 'text', text: 'replaced' }] };
      Promise.resolve().then(() => { r.content[0].n = 10n; r.resultType = 'input_required'; });
      setTimeout(() => { r.content[0].n = 10n; r.resultType = 'input_required'; }, 0);
      return r;
    }
  }
} };`;

beforeAll(async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'mutate.mjs'), PLUGIN);
  hub = await startHub({ plugins: { paths: ['./mutate.mjs'] }, servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern' }) } }, { dir });
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const echo = async (id: number, text: string, key?: string): Promise<Json> => {
  const r = await modernCall(hub.url, id, 'tools/call', { name: 'm__echo', arguments: { text } }, key ? { meta: { [META_KEY]: key } } : {});
  expect(r.body?.error).toBeUndefined();
  return r.body?.result as Json;
};

describe('a result an afterCall hook changed', () => {
  it('in place, returning nothing: no effect; the client gets the upstream result, which the ledger and the idempotency key keep', async () => {
    const db = join(hub.dir, 'ledger.db');
    const big = await echo(1, 'bigint-in-place', 'k-big');
    expect([big.resultType, big.content]).toEqual(['complete', [{ type: 'text', text: 'echo:bigint-in-place' }]]);
    const mrtr = await echo(2, 'mrtr-in-place');
    expect([mrtr.resultType, mrtr.content, mrtr.requestState]).toEqual(['complete', [{ type: 'text', text: 'echo:mrtr-in-place' }], undefined]);
    // The key's answer was stored: the retry is replayed, not run again.
    expect(await echo(3, 'bigint-in-place', 'k-big')).toEqual(big);
    const rows = await waitForRows(db, { tool: 'm__echo', method: 'tools/call' }, (r) => r.length === 3);
    expect(rows.map((r) => r.outcome)).toEqual(['ok', 'ok', 'replayed']);
    expect((await exportRows(db)).filter((r) => r.method === 'plugin/afterCall')).toEqual([]);
  });

  it('and returned: checked (one that cannot stand in fails the hook), and taken as a copy the plugin cannot change afterwards', async () => {
    const db = join(hub.dir, 'ledger.db');
    expect((await echo(11, 'bigint-returned')).content).toEqual([{ type: 'text', text: 'echo:bigint-returned' }]);
    expect((await echo(12, 'edited-and-returned')).content).toEqual([{ type: 'text', text: 'echo:edited-and-returned!' }]);
    const late = await echo(13, 'changed-after-return');
    expect([late.resultType, late.content]).toEqual(['complete', [{ type: 'text', text: 'replaced' }]]);
    const failures = await waitForRows(db, { method: 'plugin/afterCall' });
    expect(failures.map((r) => r.errorMessage)).toEqual([expect.stringContaining('a result that is not JSON')]);
    const rows = await waitForRows(db, { tool: 'm__echo', method: 'tools/call' }, (r) => r.length === 6);
    expect(rows.slice(3).map((r) => r.outcome)).toEqual(['ok', 'ok', 'ok']);
  });
});
