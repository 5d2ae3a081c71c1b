/**
 * What an onList hook leaves goes downstream only if a client can read it and the hub can still
 * route it: held to the checks an upstream's own items meet (catalog/part.ts), its name or URI
 * unchanged. One that fails them goes on as the hook was given it, reported (logged, audited),
 * as an afterCall replacement that is no result is; the rest of what the hook did stands. The real built hub, a real stdio upstream, an
 * SDK v1 client, plugin files of the test's own.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';
import { waitForRows } from './ledger-helpers.js';

let hub: HubProcess;

// A description no client reads as one, beside a hide, which stands.
const UNREADABLE = `export default { name: 'unreadable', onList(ctx) {
  for (const t of ctx.items) {
    if (t.name === 'echo') ctx.replace(t, { ...t, description: 42 });
    if (t.name === 'leak') ctx.hide(t, 'not for clients');
  }
} };`;
// The resource's URI rewritten: listed where no read could reach.
const MOVED = `export default { name: 'moved', onList(ctx) {
  for (const r of ctx.items) if (r.uri === 'mut://doc') ctx.replace(r, { ...r, uri: 'mut://elsewhere' });
} };`;
// Fine: a new description; the task support it claims is left out, as an upstream's is.
const FINE = `export default { name: 'fine', onList(ctx) {
  for (const t of ctx.items) if (t.name === 'add') ctx.replace(t, { ...t, description: 'adds two numbers', execution: { taskSupport: 'required' } });
} };`;

beforeAll(async () => {
  const dir = tmp();
  writeFileSync(join(dir, 'unreadable.mjs'), UNREADABLE);
  writeFileSync(join(dir, 'moved.mjs'), MOVED);
  writeFileSync(join(dir, 'fine.mjs'), FINE);
  hub = await startHub({ plugins: { paths: ['./unreadable.mjs', './moved.mjs', './fine.mjs'] }, servers: { m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy' }) } }, { dir });
  await waitForReady(hub.url, ['m']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('items an onList hook left', () => {
  it('that no client could read, or whose name or URI changed, go on as given, reported; the rest of the hook stands', async () => {
    const client = new Client({ name: 'sdk1', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    try {
      // The SDK's schema check of the whole list passes (a number for a description failed it).
      const { tools } = await client.listTools();
      const byName = new Map(tools.map((t) => [t.name, t]));
      expect(byName.get('m__echo')?.description).toBe('Echo the text back');
      expect(byName.has('m__leak')).toBe(false);
      expect(byName.get('m__add')?.description).toBe('adds two numbers');
      expect(byName.get('m__add')?.execution).toBeUndefined();
      const { resources } = await client.listResources();
      expect(resources.map((r) => r.uri)).toEqual(['mut://doc']);
      const read = await client.readResource({ uri: 'mut://doc' });
      expect(read.contents).toHaveLength(1);
    } finally {
      await client.close();
    }
    const modern = await modernPost(hub.url, 1, 'tools/list');
    expect(((modern.body?.result as Json).tools as Json[]).find((t) => t.name === 'm__echo')?.description).toBe('Echo the text back');
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { method: 'plugin/onList' }, (rs) => rs.length >= 2);
    const said = rows.map((r) => `${String(r.errorMessage)}`).join('\n');
    expect(said).toContain('"echo": its description is');
    expect(said).toContain('"mut://doc": its uri was changed');
  });
});
