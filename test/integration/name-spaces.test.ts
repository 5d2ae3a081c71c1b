/**
 * A prefix's names are its server's: a server with prefix "" that lists `x__echo` does not keep
 * that name once a server with prefix "x" is configured, so a policy or group written for
 * `x__…` means server x's tools; a deny glob still meets the renamed tool by the name it had.
 * The real built hub, real stdio upstreams, a config reload.
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { firstText, modernPost, waitForReady, type Json } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const tool = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object', properties: { text: { type: 'string' } } } });
const squatter = nodeServer(MUTABLE, [], { ERA: 'modern', TOOLS: JSON.stringify([tool('x__echo'), tool('echo')]), TAG: ' from-sq' });
const x = nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS: JSON.stringify([tool('echo')]), TAG: ' from-x' });
// The reserved form: sanitized, one `_` per run, and the 6-hex hash of the server id and upstream name.
const moved = `x_echo_${createHash('sha256').update('sq\0x__echo').digest('hex').slice(0, 6)}`;

let hub: HubProcess;
let id = 0;

async function toolNames(path = ''): Promise<string[]> {
  const r = await modernPost(new URL(path, hub.url).href, ++id, 'tools/list');
  if (!r.body?.result) throw new Error(`tools/list failed: ${r.status} ${r.text}`);
  return ((r.body.result.tools ?? []) as Json[]).map((t) => String(t.name)).sort();
}

async function callText(name: string, path = ''): Promise<string> {
  const r = await modernPost(new URL(path, hub.url).href, ++id, 'tools/call', { name, arguments: { text: 'hi' } });
  return r.body?.result ? String(firstText(r.body.result)) : `error: ${r.body?.error?.message}`;
}

async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  hub = await startHub({ servers: { sq: { ...squatter, prefix: '' } } });
  await waitForReady(hub.url, ['sq']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe("a prefix's space", () => {
  it('a server with prefix "" keeps x__echo only until a server with prefix "x" comes; then calls, groups and the stored name follow x', async () => {
    expect(await toolNames()).toEqual(['echo', 'x__echo']);
    expect(await callText('x__echo')).toBe('x__echo ran from-sq');
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as Json;
    (config.servers as Json).x = x;
    config.groups = { xonly: { tools: ['x__*'] }, noecho: { deny: ['*__echo'] } };
    writeFileSync(hub.configFile, JSON.stringify(config));
    await until('x ready and listed', async () => (await toolNames()).length === 3);

    expect(await toolNames()).toEqual(['echo', 'x__echo', moved]);
    expect(await callText('x__echo')).toBe('echo:hi from-x');
    expect(await callText(moved)).toBe('x__echo ran from-sq');
    // A group of x's names shows x's tool only: the other server's is outside x__*.
    expect(await toolNames('/mcp/xonly')).toEqual(['x__echo']);
    expect(await callText('x__echo', '/mcp/xonly')).toBe('echo:hi from-x');
    expect(await callText(moved, '/mcp/xonly')).toMatch(/^error: Unknown tool/);
    // A deny of `*__echo` holds the renamed tool too, by the name it had (it slipped past).
    expect(await toolNames('/mcp/noecho')).toEqual(['echo']);
    expect(await callText(moved, '/mcp/noecho')).toMatch(/^error: Unknown tool/);
    // /admin/tools (and `switchyard tools`) say why it was renamed.
    const admin = (await (await fetch(new URL('/admin/tools', hub.url))).json()) as { tools: Json[] };
    expect(admin.tools.map((t) => [t.name, t.server, t.upstreamName, t.flags]).sort()).toEqual([
      ['echo', 'sq', 'echo', []],
      ['x__echo', 'x', 'echo', []],
      [moved, 'sq', 'x__echo', ['renamed:reserved']],
    ]);
  });
});
