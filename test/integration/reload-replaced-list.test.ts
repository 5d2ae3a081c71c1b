/**
 * A reload that replaces a server while its tools are being listed at its ready (the hub lists a
 * ready server's tools at once): the old connection closes under the list, which the hub did
 * itself, so its log has no warning of it. Real hub and upstream processes; the first process's
 * lists wait for a gate file that never comes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { tmp } from './catalog-helpers.js';

let hub: HubProcess | undefined;
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

it('a tools list cut by the reload that replaced its connection is no warning; the new connection lists the tools', async () => {
  const dir = tmp();
  const r = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', LIST_GATE: join(dir, 'gate'), LIST_GATE_FIRST: '1', SERVER_NAME: 'r1' });
  hub = await startHub({ listen: { drainTimeoutMs: 200 }, servers: { r } }, { dir });
  const h = hub;
  await waitForReady(h.url, ['r']);
  // The list at its ready is held by the gate (asked as it turned ready, before the edit's reload).
  const config = JSON.parse(readFileSync(h.configFile, 'utf8')) as { servers: { r: { env: Record<string, string> } } };
  config.servers.r.env.SERVER_NAME = 'r2';
  writeFileSync(h.configFile, JSON.stringify(config));
  const failed = () => h.logs.filter((l) => l.includes('tools list (server ready, or its tools changed) failed'));
  await expect.poll(() => failed().length, { timeout: 15_000, interval: 20 }).toBeGreaterThan(0);
  expect(failed().map((l) => (JSON.parse(l) as { level: number }).level)).toEqual([20]);
  await waitForReady(h.url, ['r']);
  const tools = await fetch(h.url.replace(/\/mcp$/, '/admin/tools')).then((res) => res.json() as Promise<unknown>);
  expect(JSON.stringify(tools)).toContain('r__echo');
}, 60_000);
