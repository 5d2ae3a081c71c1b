/**
 * A server's prefix, its id when no `prefix` is given, is at most 48 characters. A longer id
 * left strict names (64 characters) no room: each was cut inside the id and ended in a hash
 * (`…-filesystem-to_7bf453`), so the tools could not be told apart and a group of `<id>__*`
 * showed almost none of them. Such a config is refused, by `config validate` and at start; with
 * a `prefix` the server's names are `<prefix>__<name>`. The real built CLI and hub, a real
 * stdio upstream.
 */
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernPost, waitForReady, type Json } from '../helpers/wire.js';

const ID = 'github-com-modelcontextprotocol-servers-src-filesystem-tool'; // 59 characters
const server = nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'legacy' });

let hub: HubProcess | undefined;
afterAll(async () => void (await hub?.stop()));

async function toolNames(url: string): Promise<string[]> {
  const r = await modernPost(url, 1, 'tools/list');
  if (!r.body?.result) throw new Error(`tools/list failed: ${r.status} ${r.text}`);
  return ((r.body.result.tools ?? []) as Json[]).map((t) => String(t.name)).sort();
}

describe("a server id that is its names' prefix", () => {
  it('longer than 48 characters is refused by config validate and by start, saying to give a prefix', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-prefix-'));
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ ledger: { path: join(dir, 'ledger.db') }, servers: { [ID]: server } }));
    const validate = await runCli(['config', 'validate', '--config', file]);
    expect(validate.code, validate.stdout).toBe(2);
    expect(validate.stderr).toContain(`servers.${ID}: the id is its tool and prompt names' prefix when no "prefix" is given, and at 59 characters`);
    expect(validate.stderr).toContain('give the server a shorter "prefix"');
    const start = await runCli(['start', '--config', file, '--port', '0']);
    expect(start.code).toBe(2);
    expect(start.stderr).toContain(`servers.${ID}:`);
  });

  it('given a prefix, its tools are <prefix>__<name>, and a group of <prefix>__* shows each of them', async () => {
    hub = await startHub({ servers: { [ID]: { ...server, prefix: 'fs' } }, groups: { fsonly: { tools: ['fs__*'] } } });
    await waitForReady(hub.url, [ID]);
    const all = ['fs__add', 'fs__echo', 'fs__leak', 'fs__mutate', 'fs__touch'];
    expect(await toolNames(hub.url)).toEqual(all);
    expect(await toolNames(`${hub.url}/fsonly`)).toEqual(all);
  });
});
