/**
 * A resource of a server that is down answers that the server is unavailable, not "not found":
 * the URIs its lists showed in this hub process (listed, or matched by a template of it) are
 * still its own while it starts again, and so are its prompts' and templates' completions; after
 * a restart of the hub too (the ledger keeps them). A URI it never showed is still not found.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sha256Hex, waitForReadyWith } from '../helpers/auth.js';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { fixture, modernCall, SDK1, waitForReady, waitForRows, type Json } from './ledger-helpers.js';

let hub: HubProcess;
let a: Json;
beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-down-resources-'));
  const plain = fixture(SDK1, dir);
  // Slow to start, so a restart leaves it `starting` for a second.
  a = { ...plain, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(plain.args as string[])], env: { ...(plain.env as Json), START_DELAY_MS: '1500' } };
  const slow = a;
  hub = await startHub({ servers: { a: slow }, groups: { none: { servers: [] } } }, { dir });
  await waitForReady(hub.url, ['a']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const read = async (id: string, uri: string, url = hub.url) => (await modernCall(url, id, 'resources/read', { uri })).body;

describe('resources of a server that is down', () => {
  it('a read of a URI it listed, or one its template matches, says the server is unavailable', async () => {
    const listed = await modernCall(hub.url, 'list', 'resources/list');
    expect((listed.body?.result?.resources as Json[]).map((r) => r.uri)).toContain('sdk1://static/hello');
    const templates = await modernCall(hub.url, 'templates', 'resources/templates/list');
    expect((templates.body?.result?.resourceTemplates as Json[]).map((r) => r.uriTemplate)).toContain('sdk1://item/{id}');
    const prompts = await modernCall(hub.url, 'prompts', 'prompts/list');
    expect((prompts.body?.result?.prompts as Json[]).map((p) => p.name)).toContain('a__greet');
    expect((await read('up', 'sdk1://item/7'))?.result).toMatchObject({ contents: [{ text: 'item 7' }] });

    const origin = new URL(hub.url).origin;
    expect((await fetch(`${origin}/admin/servers/a/restart`, { method: 'POST' })).status).toBe(200);
    const unavailable = { code: -32603, message: expect.stringMatching(/^server "a" is starting/) };
    expect((await read('hello', 'sdk1://static/hello'))?.error).toMatchObject(unavailable);
    expect((await read('item', 'sdk1://item/8'))?.error).toMatchObject(unavailable);
    // The completion of its template is its own too. One of a prompt's argument waits for its
    // start, as prompts/get does (first-start.ts): asked last, with what it then answers.
    const complete = async (id: string, ref: Json) => (await modernCall(hub.url, id, 'completion/complete', { ref, argument: { name: 'name', value: 'Al' } })).body;
    expect((await complete('c-template', { type: 'ref/resource', uri: 'sdk1://item/{id}' }))?.error).toMatchObject(unavailable);
    // Never shown: not found, as before; nor to a group that does not show the server.
    expect((await read('other', 'sdk1://elsewhere'))?.error).toMatchObject({ code: -32602, data: { uri: 'sdk1://elsewhere' } });
    expect((await read('group', 'sdk1://static/hello', `${hub.url}/none`))?.error).toMatchObject({ code: -32602 });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'unavailable' }, (r) => r.length >= 3);
    expect(rows.map((r) => [r.requestId, r.method, r.server])).toEqual([
      ['hello', 'resources/read', 'a'],
      ['item', 'resources/read', 'a'],
      ['c-template', 'completion/complete', 'a'],
    ]);
    const prompted = await complete('c-prompt', { type: 'ref/prompt', name: 'a__greet' });
    expect(prompted?.error, JSON.stringify(prompted)).toBeUndefined();
    expect((await complete('c-none', { type: 'ref/prompt', name: 'a__nothing' }))?.error).toMatchObject({ code: -32602, message: 'Unknown completion reference: a__nothing' });

    await waitForReady(hub.url, ['a']);
    expect((await read('back', 'sdk1://static/hello'))?.result).toMatchObject({ contents: [{ text: 'hello from sdk1-legacy' }] });
  }, 40_000);

  it('after a restart of the hub too, while the server is still starting (the ledger kept what its lists showed)', async () => {
    await hub.stop();
    // Slower than the start-up grace this time (made short: SWITCHYARD_STARTUP_GRACE_MS), so reads are answered while it starts.
    const slower = { ...a, env: { ...(a.env as Json), START_DELAY_MS: '3000' } };
    hub = await startHub({ servers: { a: slower }, groups: { none: { servers: [] } } }, { dir: hub.dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '300' } });
    const unavailable = { code: -32603, message: expect.stringMatching(/^server "a" is starting/) };
    expect((await read('r-hello', 'sdk1://static/hello'))?.error).toMatchObject(unavailable);
    expect((await read('r-item', 'sdk1://item/9'))?.error).toMatchObject(unavailable);
    expect((await read('r-other', 'sdk1://elsewhere'))?.error).toMatchObject({ code: -32602, data: { uri: 'sdk1://elsewhere' } });
    expect((await read('r-group', 'sdk1://static/hello', `${hub.url}/none`))?.error).toMatchObject({ code: -32602 });
    const ready = (await fetch(new URL('/healthz', hub.url)).then((r) => r.json())) as { servers: { id: string; state: string }[] };
    expect(ready.servers.find((s) => s.id === 'a')?.state).toBe('starting');
  }, 40_000);

  it("a read of a down server's resource is not sent through another server's template that matches it", async () => {
    await hub.stop();
    const mutable = join(ROOT, 'test/fixtures/catalog/mutable-server.mjs');
    const servers = {
      // Listed first, slow to start again: it owns shared://x by its list.
      a: { command: process.execPath, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), mutable], env: { ERA: 'legacy', DOC_URI: 'shared://x', START_DELAY_MS: '1500' } },
      // Its template matches shared://x too; it has no such resource.
      b: { command: process.execPath, args: [mutable], env: { ERA: 'legacy', DOC_URI: 'shared://b-own', TEMPLATE: 'shared://{+path}' } },
    };
    hub = await startHub({ servers });
    await waitForReady(hub.url, ['a', 'b']);
    expect((await modernCall(hub.url, 'l', 'resources/list')).body?.result?.resources).toEqual(expect.arrayContaining([expect.objectContaining({ uri: 'shared://x' })]));
    expect((await read('x-up', 'shared://x'))?.result).toMatchObject({ contents: [{ uri: 'shared://x' }] });
    const origin = new URL(hub.url).origin;
    expect((await fetch(`${origin}/admin/servers/a/restart`, { method: 'POST' })).status).toBe(200);
    expect((await read('x-down', 'shared://x'))?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/^server "a" is starting/) });
    const rows = await waitForRows(join(hub.dir, 'ledger.db'), { outcome: 'unavailable' }, (r) => r.some((x) => x.requestId === 'x-down'));
    expect(rows.find((r) => r.requestId === 'x-down')?.server).toBe('a');
  }, 40_000);
});

describe('a resource a tool linked without listing it', () => {
  it("is read from the server whose tool named it (digest §3.4: links need not be listed); one never named is still not found; another user's thousands of links do not push it out", async () => {
    await hub.stop();
    const mutable = join(ROOT, 'test/fixtures/catalog/mutable-server.mjs');
    const keys = { alice: 'sy_down-resources-alice-000000000000000000000000', bob: 'sy_down-resources-bob-1111111111111111111111111111' };
    hub = await startHub({
      auth: { apiKeys: Object.entries(keys).map(([principal, key]) => ({ principal, sha256: sha256Hex(key) })) },
      servers: { k: { command: process.execPath, args: [mutable], env: { DOC_URI: 'k://doc', TOOLS: JSON.stringify([{ name: 'link', inputSchema: { type: 'object' } }]) } } },
    });
    await waitForReadyWith(hub.url, ['k'], keys.alice);
    const as = (who: keyof typeof keys) => ({ headers: { authorization: `Bearer ${keys[who]}` } });
    const link = (who: keyof typeof keys, args: Json) => modernCall(hub.url, `link-${who}`, 'tools/call', { name: 'k__link', arguments: args }, as(who));
    const readAs = async (who: keyof typeof keys, uri: string) => (await modernCall(hub.url, `read-${who}`, 'resources/read', { uri }, as(who))).body;
    const call = await link('alice', { uri: 'unlisted://k/1' });
    expect(call.body?.result?.content).toEqual([{ type: 'resource_link', uri: 'unlisted://k/1', name: 'linked' }]);
    expect((await readAs('alice', 'unlisted://k/1'))?.result).toMatchObject({ contents: [{ uri: 'unlisted://k/1', text: 'linked unlisted://k/1' }] });
    expect((await readAs('alice', 'unlisted://k/2'))?.error).toMatchObject({ code: -32602, data: { uri: 'unlisted://k/2' } });
    // Links are each user's: bob was not linked alice's.
    expect((await readAs('bob', 'unlisted://k/1'))?.error).toMatchObject({ code: -32602 });
    // Bob is linked one; alice's next result links more than the hub keeps for everyone.
    expect((await link('bob', { uri: 'unlisted://k/bob' })).status).toBe(200);
    expect(((await link('alice', { uri: 'unlisted://k/many', count: 4200 })).body?.result?.content as Json[]).length).toBe(4200);
    expect((await readAs('bob', 'unlisted://k/bob'))?.result).toMatchObject({ contents: [{ uri: 'unlisted://k/bob', text: 'linked unlisted://k/bob' }] });
    expect((await readAs('alice', 'unlisted://k/many-4199'))?.result).toMatchObject({ contents: [{ text: 'linked unlisted://k/many-4199' }] });
  }, 40_000);
});
