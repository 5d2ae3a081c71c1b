/**
 * A plugin file that is no plugin, as the operator meets it from the real built hub: the log line
 * at the start and `switchyard reload`'s report name the file and say what it held (a file that
 * does not parse, a `null` export, a factory returning null), not a bare message of Node's.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop();
  if (hub) rmSync(hub.dir, { recursive: true, force: true });
});

it('names the file and what it held, at the start and at a reload; the hub runs on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-not-a-plugin-'));
  const file = join(dir, 'p.mjs');
  writeFileSync(file, `export default { name: 'p', beforeCall( { };`);
  hub = await startHub({ servers: { s: nodeServer('test/fixtures/servers/sdk1-server.mjs') }, plugins: { paths: ['./p.mjs'] } }, { dir });
  const loadErrors = () => hub!.logs.filter((l) => l.includes('plugin could not be loaded')).map((l) => JSON.parse(l) as { plugin: string; message: string });
  expect(loadErrors()).toEqual([expect.objectContaining({ plugin: file, message: "SyntaxError: Unexpected token ';'" })]);

  writeFileSync(file, `export default null;`);
  let r = await runCli(['reload', '--config', hub.configFile, '--url', hub.url]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`${file}: the module exports null, not a plugin`);

  writeFileSync(file, `export default () => null;`);
  r = await runCli(['reload', '--config', hub.configFile, '--url', hub.url]);
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(`${file}: the factory returned null, not a plugin`);
  expect(hub.proc.exitCode).toBeNull();
}, 60_000);
