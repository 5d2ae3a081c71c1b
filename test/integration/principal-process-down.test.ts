/**
 * A principal's own process (processPerPrincipal) that crash-loops to `failed` has that
 * principal's calls refused (`server "p" is failed: …`) for a minute at a time, while the server's
 * own process is ready: /admin/servers and `switchyard servers` showed the server ready, no
 * error, so the operator had nothing to go on. They now say which principal's own connection is
 * down, and why.
 */
import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { BIN, nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import type { ServerView } from '../../src/downstream/admin-views.js';
import { text, waitUntil } from './faults-helpers.js';
import { modernCall } from './ledger-helpers.js';

const KEYS = { alice: 'sy_principal-down-alice-key-0000000001', ops: 'sy_principal-down-ops-key-000000000002' };
let hub: HubProcess;
let n = 0;

beforeAll(async () => {
  hub = await startHub(
    {
      auth: {
        apiKeys: [
          { principal: 'alice', sha256: sha256Hex(KEYS.alice) },
          { principal: 'ops', sha256: sha256Hex(KEYS.ops), scopes: ['switchyard:admin'] },
        ],
      },
      servers: {
        p: {
          ...nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { TOOLS: JSON.stringify([{ name: 'exit', inputSchema: { type: 'object' } }, { name: 'echo', inputSchema: { type: 'object' } }]) }),
          processPerPrincipal: true,
        },
      },
    },
    { args: ['--no-watch'] },
  );
  await waitForReadyWith(hub.url, ['p'], KEYS.alice);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
});

async function servers(): Promise<ServerView[]> {
  const res = await fetch(new URL('/admin/servers', hub.url), { headers: { authorization: `Bearer ${KEYS.ops}` } });
  return ((await res.json()) as { servers: ServerView[] }).servers;
}

describe("a processPerPrincipal server whose principal's own process crash-loops", () => {
  it("is shown with that principal's own connection failed and why, beside its own ready state, in /admin/servers and `switchyard servers`", async () => {
    const ready = (await servers()).find((s) => s.id === 'p')!;
    expect(ready.ownDown).toBeUndefined();
    // Each crash of alice's process; while it restarts her call is refused, and once past the
    // crash-loop limit it is `failed`.
    const refused = await waitUntil(
      "alice's own process failed",
      async () => {
        const a = await modernCall(hub.url, `down${++n}`, 'tools/call', { name: 'p__exit', arguments: {} }, { headers: { authorization: `Bearer ${KEYS.alice}` } });
        const t = text(a);
        return /is failed/.test(t) ? t : undefined;
      },
      30_000,
    );
    expect(refused).toMatch(/server "p" is failed: process exited with code 1/);
    const p = (await servers()).find((s) => s.id === 'p')!;
    expect(p.state).toBe('ready');
    expect(p.lastError).toBeNull();
    expect(p.ownDown).toEqual([{ principal: 'alice', state: 'failed', lastError: 'process exited with code 1', stderr: null }]);
    const cli = spawnSync(process.execPath, [BIN, 'servers', '--config', hub.configFile, '--url', new URL(hub.url).origin], {
      encoding: 'utf8',
      env: { ...process.env, SWITCHYARD_API_KEY: KEYS.ops },
    });
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toMatch(/^p +ready .*principal "alice"'s own connection failed: process exited with code 1$/m);
    // `servers restart` closes the principals' own processes too: alice's next call gets a new one.
    expect((await fetch(new URL('/admin/servers/p/restart', hub.url), { method: 'POST', headers: { authorization: `Bearer ${KEYS.ops}` } })).status).toBe(200);
    const back = await waitUntil('alice served again', async () => {
      const t = text(await modernCall(hub.url, `down${++n}`, 'tools/call', { name: 'p__echo', arguments: { x: 1 } }, { headers: { authorization: `Bearer ${KEYS.alice}` } }));
      return /unavailable/.test(t) ? undefined : t;
    });
    expect(back).not.toMatch(/failed/);
    expect((await servers()).find((s) => s.id === 'p')!.ownDown).toBeUndefined();
  }, 60_000);
});
