/**
 * A dropped item's reason (a log line, a `catalog/drop` ledger row) quotes the value of its field
 * of the wrong type cut: redacted before the cut, so a token the server put there does not reach
 * the log or the ledger all but its end (which no redaction rule then recognised: too short for
 * its shape). Real built hub, the legacy mutable-server fixture over stdio, the ledger read back.
 */
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

const TOKEN = `ghp_${'A1b2C3d4E5'.repeat(4)}`;
const tools = JSON.stringify([
  { name: 'echo', description: 'Echo the text back', inputSchema: { type: 'object' } },
  { name: 'meta_token', _meta: TOKEN, inputSchema: { type: 'object' } },
  { name: 'title_token', title: [TOKEN], inputSchema: { type: 'object' } },
  { name: 'size_token', description: 7, inputSchema: { type: 'object' } },
]);

let hub: HubProcess;
beforeAll(async () => {
  hub = await startHub({ servers: { s: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy', TOOLS: tools }) } });
  await waitForReady(hub.url, ['s']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe("a dropped item's reason quoting its field", () => {
  it('does not keep most of a token the server put in it', async () => {
    const db = new Database(join(hub.dir, 'ledger.db'), { readonly: true });
    try {
      const drops = () => db.prepare("SELECT upstream_name AS tool, error_message AS why FROM audit WHERE method = 'catalog/drop' AND server = 's' ORDER BY upstream_name").all() as { tool: string; why: string }[];
      await expect.poll(() => drops().map((r) => r.tool), { timeout: 10_000 }).toEqual(['meta_token', 'size_token', 'title_token']);
      const why = Object.fromEntries(drops().map((r) => [r.tool, r.why]));
      expect(why.meta_token).toMatch(/^shape: its _meta is string "\[redacted/);
      expect(why.meta_token).not.toContain(TOKEN.slice(0, 16));
      // What has no token is quoted as it was.
      expect(why.title_token).toBe('shape: its title is a list');
      expect(why.size_token).toBe('shape: its description is number 7');
    } finally {
      db.close();
    }
    expect(hub.logs.some((l) => l.includes('tool dropped: a field is not of the type clients read'))).toBe(true);
    expect(hub.logs.join('\n')).not.toContain(TOKEN.slice(0, 16));
  });
});
