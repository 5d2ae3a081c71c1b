/**
 * A plugin file that is no plugin, as the operator meets it from the real built hub: the log line
 * at the start and `switchyard reload`'s report name the file and say what it held (a file that
 * does not parse, a `null` export, a factory returning null), not a bare message of Node's; and a
 * running plugin whose file an edit broke runs on (it denies calls still) until the file loads.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
  if (hub) rmSync(hub.dir, { recursive: true, force: true });
});

const DENIER = `export default { name: 'denier', beforeCall() { return { deny: 'not today' }; } };`;

it('names the file and what it held, at the start and at a reload; a running plugin an edit broke runs on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-not-a-plugin-'));
  const denier = join(dir, 'denier.mjs');
  const syntax = join(dir, 'syntax.mjs');
  writeFileSync(denier, DENIER);
  writeFileSync(syntax, `export default { name: 'p', beforeCall( { };`);
  hub = await startHub({ servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') }, plugins: { paths: ['./denier.mjs', './syntax.mjs'] } }, { dir });
  await waitForReady(hub.url, ['s']);
  const loadErrors = () => hub!.logs.filter((l) => l.includes('plugin could not be loaded')).map((l) => JSON.parse(l) as { plugin: string; message: string });
  expect(loadErrors()).toEqual([expect.objectContaining({ plugin: syntax, message: "SyntaxError: Unexpected token ';'" })]);

  const client = new Client({ name: 'not-a-plugin', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
  const denied = async () => JSON.stringify((await client.callTool({ name: 's__echo', arguments: { text: 'x' } })).content).includes('not today');
  expect(await denied()).toBe(true);

  writeFileSync(denier, `export default null;`);
  let r = await runCli(['reload', '--config', hub.configFile, '--url', hub.url]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`${denier}: the module exports null, not a plugin (an object with a name and hooks, or a factory returning one); the version loaded before runs on`);
  expect(await denied()).toBe(true);

  writeFileSync(denier, `export default () => null;`);
  r = await runCli(['reload', '--config', hub.configFile, '--url', hub.url]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`${denier}: the factory returned null, not a plugin`);
  expect(await denied()).toBe(true);

  // Fixed (and the broken one out of the config): the new version takes over, reload exits 0.
  writeFileSync(denier, `export default { name: 'denier' };`);
  writeFileSync(hub.configFile, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') }, plugins: { paths: ['./denier.mjs'] } }));
  r = await runCli(['reload', '--config', hub.configFile, '--url', hub.url]);
  expect(r.code).toBe(0);
  expect(await denied()).toBe(false);
  await client.close();
  expect(hub.proc.exitCode).toBeNull();
}, 60_000);
