/**
 * An idempotency key reused on a tool group's endpoint (`/mcp/<group>`) for another call is
 * refused naming the conflict: the same tool with other arguments, the other tool when the group
 * shows it, "another tool" when it does not (a reload narrowed the group). On a fresh hub the
 * first calls are routed by their server's list alone and the hub's tools list is built in the
 * background: here it stays unbuilt, `slow`'s tools/list held by its gate file, so the refusal
 * cannot lean on that list. Real hub, the mutable fixture upstream, raw modern requests.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeServer, startHub } from '../helpers/hub-process.js';
import { loggedTimes, setSection } from '../helpers/config-edit.js';
import { firstText, modernBody, modernHeaders, modernMeta, post, waitForReady, type Json } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';

describe("an idempotency key reused on a group's endpoint of a fresh hub", () => {
  it('is refused naming the conflict: this tool with other arguments, the other tool the group shows, another tool once the group hides it', async () => {
    const dir = tmp();
    const [gate, slowStats] = [join(dir, 'slow-gate'), join(dir, 'slow-stats.json')];
    const hub = await startHub({
      groups: { mine: { servers: ['m', 'slow'], tools: ['m__echo', 'm__add'] } },
      servers: { m: nodeServer(MUTABLE, [], { ERA: 'modern' }), slow: nodeServer(MUTABLE, [], { ERA: 'modern', LIST_GATE: gate, STATS_FILE: slowStats }) },
    });
    const mine = hub.url.replace(/\/mcp$/, '/mcp/mine');
    const keyed = async (url: string, id: string, name: string, args: Json, key: string) => {
      const r = await post(url, modernBody(id, 'tools/call', { name, arguments: args }, { ...modernMeta(), 'dev.switchyard/idempotency-key': key }), modernHeaders('tools/call', name));
      return r.body?.error ? `error: ${JSON.stringify(r.body.error)}` : String(firstText(r.body?.result));
    };
    const used = (key: string, other: string) => `idempotency key "${key}" was already used for ${other}; use a new key`;
    try {
      await waitForReady(hub.url, ['m', 'slow']);
      // slow's tools/list, asked for at its ready, is held: no tools list of the hub's is built.
      await expect.poll(() => (existsSync(slowStats) ? (JSON.parse(readFileSync(slowStats, 'utf8')) as Json)['tools/list'] : 0), { timeout: 10_000, interval: 20 }).toBe(1);
      expect(await keyed(mine, 'k1', 'm__echo', { text: 'a' }, 'k')).toBe('echo:a');
      expect(await keyed(mine, 'k2', 'm__echo', { text: 'b' }, 'k')).toBe(used('k', 'this tool with other arguments'));
      // The group shows m__echo: named (it was "another tool" until the hub's list was built).
      expect(await keyed(mine, 'k3', 'm__add', { a: 1, b: 2 }, 'k')).toBe(used('k', 'tool "m__echo"'));
      // On /mcp the key is another one; there too the other tool is named.
      expect(await keyed(hub.url, 'k4', 'm__add', { a: 1, b: 2 }, 'k')).toBe('3');
      expect(await keyed(hub.url, 'k5', 'm__echo', { text: 'a' }, 'k')).toBe(used('k', 'tool "m__add"'));
      // The group no longer shows m__echo: its name is not told there.
      setSection(hub, 'groups', { mine: { servers: ['m', 'slow'], tools: ['m__add'] } });
      await loggedTimes(hub, 'config reloaded', 1);
      expect(await keyed(mine, 'k6', 'm__add', { a: 1, b: 2 }, 'k')).toBe(used('k', 'another tool'));
      expect(existsSync(gate)).toBe(false); // all the while slow's list was held
    } finally {
      writeFileSync(gate, '');
      await hub.stop();
    }
  }, 60_000);
});
