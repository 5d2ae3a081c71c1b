/**
 * Acceptance: hub names survive a restart of the real hub with a config change that would
 * otherwise rename. Server `a` (prefix `x`) owns `x__echo`; after a restart with a new server
 * `b` of the same prefix inserted before it, `x__echo` still routes to `a` (the ledger rows
 * say which server ran each call) and the newcomer gets the suffixed name.
 */
import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { fixture, modernCall, queryRows, SDK1, SDK2, textOf, waitForReady, waitForRows, type Json } from './ledger-helpers.js';

let hub: HubProcess | undefined;
// Each test's last hub is stopped before the next test starts one (and one a failed assertion
// left running too).
afterEach(async () => {
  await hub?.stop();
  hub = undefined;
});

async function toolNames(url: string): Promise<string[]> {
  const a = await modernCall(url, 'list', 'tools/list');
  return ((a.body?.result?.tools ?? []) as Json[]).map((t) => String(t.name));
}

/** A first hub process with `a` alone, whose tool and prompt lists store their names; then it stops. */
async function listedOnce(dir: string, a: Json): Promise<void> {
  hub = await startHub({ servers: { a } }, { dir });
  await waitForReady(hub.url, ['a']);
  expect(await toolNames(hub.url)).toContain('x__echo');
  const prompts = await modernCall(hub.url, 'prompts', 'prompts/list');
  expect((prompts.body?.result?.prompts as Json[]).map((p) => p.name)).toContain('x__greet');
  expect(await hub.stop()).toBe(0);
  hub = undefined;
}

/**
 * The state both cases that start from a stored list need (`a` listed once): made by one hub
 * run, the first time a case asks, and its ledger copied to each case's own folder (a hub and
 * its SDK server started and stopped is most of such a case's time). `a` keeps its config, the
 * counter file included, in every copy.
 */
const template = mkdtempSync(join(tmpdir(), 'switchyard-ledger-names-listed-'));
const listedA = fixture(SDK1, template, { prefix: 'x' });
let listed: Promise<void> | undefined;
async function fromListed(prefix: string): Promise<string> {
  listed ??= listedOnce(template, listedA);
  await listed;
  const dir = mkdtempSync(join(tmpdir(), prefix));
  // A stopped hub folded its WAL in and emptied its pending files: the database is all there is.
  for (const f of readdirSync(template)) if (f.startsWith('ledger.db') && !f.endsWith('.lock') && !f.endsWith('.owner')) copyFileSync(join(template, f), join(dir, f));
  return dir;
}

describe('persistent hub names', () => {
  it('a server inserted before another with the same prefix does not take its names after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-ledger-names-'));
    const db = join(dir, 'ledger.db');
    const a = fixture(SDK1, dir, { prefix: 'x' });
    const b = fixture(SDK2, dir, { prefix: 'x' }, join(dir, 'counter-b.json'));

    hub = await startHub({ servers: { a } }, { dir });
    await waitForReady(hub.url, ['a']);
    expect(await toolNames(hub.url)).toEqual(expect.arrayContaining(['x__echo', 'x__add']));
    expect(textOf((await modernCall(hub.url, 'first', 'tools/call', { name: 'x__echo', arguments: { text: '1' } })).body?.result)).toBe('echo:1');
    expect(await hub.stop()).toBe(0);

    // `b` comes first in config order: without stored names it would be given `x__echo`.
    hub = await startHub({ servers: { b, a } }, { dir });
    await waitForReady(hub.url, ['a', 'b']);
    const names = await toolNames(hub.url);
    expect(names).toContain('x__echo');
    const suffixed = names.filter((n) => /^x__echo_[0-9a-f]{8}$/.test(n));
    expect(suffixed).toHaveLength(1);

    expect(textOf((await modernCall(hub.url, 'second', 'tools/call', { name: 'x__echo', arguments: { text: '2' } })).body?.result)).toBe('echo:2');
    expect(textOf((await modernCall(hub.url, 'third', 'tools/call', { name: suffixed[0], arguments: { text: '3' } })).body?.result)).toBe('echo:3');
    const rows = await queryRows(db, { outcome: 'ok' });
    const served = Object.fromEntries(rows.filter((r) => r.method === 'tools/call').map((r) => [r.requestId, [r.tool, r.server, r.upstreamName]]));
    expect(served).toEqual({
      first: ['x__echo', 'a', 'echo'],
      second: ['x__echo', 'a', 'echo'],
      third: [suffixed[0], 'b', 'echo'],
    });

    // The assignments live in the ledger file.
    await hub.stop();
    const raw = new Database(db, { readonly: true });
    const stored = raw.prepare(`SELECT server, hub_name FROM names WHERE kind = 'tool' AND upstream_name = 'echo' ORDER BY server`).all();
    raw.close();
    expect(stored).toEqual([
      { server: 'a', hub_name: 'x__echo' },
      { server: 'b', hub_name: suffixed[0] },
    ]);
  }, 40_000);

  it('a server that is down keeps its names: another one listed meanwhile does not take them', async () => {
    const dir = await fromListed('switchyard-ledger-names-down-');
    const a = listedA;
    const b = fixture(SDK2, dir, { prefix: 'x' }, join(dir, 'counter-b.json'));

    // `a` now fails to start (its command exits), while `b` comes up with the same names.
    const down = { command: process.execPath, args: ['-e', 'process.exit(1)'], prefix: 'x', tools: { deny: ['add'] } };
    hub = await startHub({ servers: { b, a: down }, groups: { onlyb: { servers: ['b'] } } }, { dir });
    await waitForReady(hub.url, ['b']);

    // A client that kept the list of the hub before (no list in this process) calls a tool of
    // `a`: the name is stored for `a`, so the call says it is unavailable, not unknown.
    const early = await modernCall(hub.url, 'early', 'tools/call', { name: 'x__echo', arguments: { text: 'e' } });
    expect(early.body?.error).toBeUndefined();
    expect(early.body?.result?.isError).toBe(true);
    expect(textOf(early.body?.result)).toMatch(/^Tool x__echo is unavailable: server "a" is (failed|starting|stopped)/);
    const unavailable = await waitForRows(join(dir, 'ledger.db'), { outcome: 'unavailable' });
    expect(unavailable.find((r) => r.requestId === 'early')).toMatchObject({ tool: 'x__echo', server: 'a' });
    // Still unknown: a name never given, a tool `a` no longer shows (deny), and a group without `a`.
    const unknown = async (id: string, name: string, url = hub!.url) => (await modernCall(url, id, 'tools/call', { name, arguments: {} })).body?.error;
    expect(await unknown('never', 'x__nope')).toMatchObject({ code: -32602, message: 'Unknown tool: x__nope' });
    expect(await unknown('denied', 'x__add')).toMatchObject({ code: -32602, message: 'Unknown tool: x__add' });
    expect(await unknown('group', 'x__echo', `${hub.url}/onlyb`)).toMatchObject({ code: -32602, message: 'Unknown tool: x__echo' });
    // A prompt likewise: an error that names the server, not "Unknown prompt".
    const greet = await modernCall(hub.url, 'greet', 'prompts/get', { name: 'x__greet', arguments: { name: 'n' } });
    expect(greet.body?.error).toMatchObject({ code: -32603, message: expect.stringMatching(/^server "a" is (failed|starting|stopped)/) });
    expect((await modernCall(hub.url, 'nope', 'prompts/get', { name: 'x__nope', arguments: {} })).body?.error).toMatchObject({ code: -32602, message: 'Unknown prompt: x__nope' });
    expect((await modernCall(`${hub.url}/onlyb`, 'greet-b', 'prompts/get', { name: 'x__greet', arguments: {} })).body?.error).toMatchObject({ code: -32602 });
    const greetRow = (await waitForRows(join(dir, 'ledger.db'), { outcome: 'unavailable' }, (rows) => rows.some((r) => r.requestId === 'greet'))).find((r) => r.requestId === 'greet');
    expect(greetRow).toMatchObject({ method: 'prompts/get', server: 'a', upstreamName: 'greet' });

    const whileDown = await toolNames(hub.url);
    expect(whileDown).not.toContain('x__echo');
    expect(whileDown.filter((n) => /^x__echo_[0-9a-f]{8}$/.test(n))).toHaveLength(1);
    expect(await hub.stop()).toBe(0);

    // Back up: `a` still owns x__echo, `b` keeps the name it was given.
    hub = await startHub({ servers: { b, a } }, { dir });
    await waitForReady(hub.url, ['a', 'b']);
    const both = await toolNames(hub.url);
    expect(both).toContain('x__echo');
    expect(both).toEqual(expect.arrayContaining(whileDown.filter((n) => n.startsWith('x__echo_'))));
    expect(textOf((await modernCall(hub.url, 'back', 'tools/call', { name: 'x__echo', arguments: { text: 'a' } })).body?.result)).toBe('echo:a');
    const rows = await queryRows(join(dir, 'ledger.db'), { outcome: 'ok' });
    expect(rows.find((r) => r.requestId === 'back')?.server).toBe('a');
  }, 60_000);

  it("a call, a prompt or a prompt argument's completion by a stored name of a server on its first start waits for it, and is answered once it is ready", async () => {
    const dir = await fromListed('switchyard-ledger-names-grace-');
    const a = listedA;
    const b = fixture(SDK2, dir, { prefix: 'y' }, join(dir, 'counter-b.json'));

    // `a` takes 4.5 s to start, past the hub's startup grace (3 s from its start, and `a` is
    // spawned after that); `b` is ready at once, so requests are not held for capabilities.
    const slowA = { ...a, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(a.args as string[])], env: { ...(a.env as Json), START_DELAY_MS: '4500' } };
    const spawned = Date.now();
    hub = await startHub({ servers: { b, a: slowA } }, { dir });
    await waitForReady(hub.url, ['b']);
    // A client that kept the hub's lists from before: the names are `a`'s (the ledger says so),
    // so all three wait for its first start rather than hearing "unavailable" (or, for the
    // completion, "Unknown completion reference") after the grace.
    const [call, prompt, completion] = await Promise.all([
      modernCall(hub.url, 'while-starting', 'tools/call', { name: 'x__echo', arguments: { text: 'x' } }),
      modernCall(hub.url, 'prompt-while-starting', 'prompts/get', { name: 'x__greet', arguments: { name: 'n' } }),
      modernCall(hub.url, 'complete-while-starting', 'completion/complete', { ref: { type: 'ref/prompt', name: 'x__greet' }, argument: { name: 'name', value: 'al' } }),
    ]);
    expect(Date.now() - spawned).toBeGreaterThanOrEqual(4500);
    expect(textOf(call.body?.result), JSON.stringify(call.body)).toBe('echo:x');
    expect(prompt.body?.error, JSON.stringify(prompt.body)).toBeUndefined();
    expect(JSON.stringify(prompt.body?.result?.messages)).toContain('Hello, n!');
    expect(completion.body?.result?.completion, JSON.stringify(completion.body)).toMatchObject({ values: ['alice', 'albert'] });
  }, 40_000);
});

describe('persistent hub names, at the stop', () => {
  // By a stored name, a call waiting for its server's first start was refused as a down tool at
  // the stop (`server "a" is stopped`), where a list waiting in the start-up grace hears the stop's
  // own error; and it, and a prompt so waiting, held the drain for its whole drainTimeoutMs (10 s).
  it("a call and a prompt by stored names waiting for their server's first start are answered at once with the stop's own error", async () => {
    const dir = await fromListed('switchyard-ledger-names-stop-');
    const a = listedA;
    const slowA = { ...a, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(a.args as string[])], env: { ...(a.env as Json), START_DELAY_MS: '60000' } };
    // No start-up grace: each waits for `a` alone (hub/first-start.ts).
    hub = await startHub({ servers: { a: slowA } }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } });
    const call = modernCall(hub.url, 'call-at-stop', 'tools/call', { name: 'x__echo', arguments: { text: 'x' } });
    const prompt = modernCall(hub.url, 'prompt-at-stop', 'prompts/get', { name: 'x__greet', arguments: { name: 'n' } });
    const waiting = () => hub!.logs.filter((l) => l.includes('waiting for the first start of its server')).length;
    for (const end = Date.now() + 15_000; waiting() < 2 && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(waiting()).toBe(2);
    const t0 = Date.now();
    const exited = hub.stop('SIGTERM');
    const answers = await Promise.all([call, prompt]);
    // At the stop's beginning, not at the drain's deadline (10 s), however loaded the machine.
    expect(Date.now() - t0).toBeLessThan(7_000);
    for (const x of answers) expect(x.body?.error, JSON.stringify(x.body)).toMatchObject({ code: -32603, message: expect.stringContaining('the hub is shutting down: the request was still running') });
    expect(await exited).toBe(0);
    hub = undefined;
    const rows = await queryRows(join(dir, 'ledger.db'), { outcome: 'unavailable' });
    for (const id of ['call-at-stop', 'prompt-at-stop']) expect(rows.find((r) => r.requestId === id), id).toMatchObject({ server: 'a', errorMessage: expect.stringContaining('the hub is shutting down') });
  }, 40_000);
});
