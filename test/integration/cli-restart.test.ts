/**
 * `switchyard servers restart <id>`: one upstream gets a fresh connection while the others and
 * the calls in flight go on, and a server that could not start is tried again at once. The real
 * built binary against the real built daemon, a real SDK v1 upstream and client.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { runCli, runCliBatch } from '../helpers/cli.js';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { health, waitForReady, type Json } from '../helpers/wire.js';

const SDK1 = 'test/fixtures/servers/sdk1-server.mjs';

const run = (args: string[]) => runCli(args, { env: { SWITCHYARD_API_KEY: '' } });

const textOf = (r: Json): string => ((r.content ?? []) as { text?: string }[]).map((c) => c.text ?? '').join('');

let hub: HubProcess;
let later: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-restart-'));
  later = join(dir, 'later.mjs'); // not there yet: b cannot start
  hub = await startHub(
    {
      servers: {
        a: nodeServer(SDK1, [], { SERVER_NAME: 'alpha' }),
        b: { command: process.execPath, args: [later] },
        c: nodeServer(SDK1, [], { SERVER_NAME: 'gamma' }),
        off: { ...nodeServer(SDK1), disabled: true },
      },
    },
    { dir },
  );
  await waitForReady(hub.url, ['a', 'c']);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('switchyard servers restart', () => {
  it('gives a server a fresh connection; a call in flight on the old one finishes; the other server is not touched', async () => {
    const client = new Client({ name: 'restart-client', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    const before = (await health(hub.url)).servers.find((s) => s.id === 'a') as unknown as Json;
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('a__slow');
    const other = (await health(hub.url)).servers.find((s) => s.id === 'c');
    const slow = client.callTool({ name: 'a__slow', arguments: { ms: 3_000 } });
    // In flight on the old connection before the restart (a fixed wait lost that race under load).
    const inFlight = async (): Promise<unknown> => ((await health(hub.url)).servers.find((s) => s.id === 'a') as unknown as Json).inFlight;
    // Up to 2.5 s of the call's 3 (1 s was not enough once on a CI run: the call had not reached the server yet).
    for (let i = 0; i < 125 && (await inFlight()) !== 1; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await inFlight()).toBe(1);

    const r = await run(['servers', 'restart', 'a', '--url', hub.url]);
    expect([r.code, r.stdout, r.stderr]).toEqual([0, 'restarted "a": ready (2025-11-25, alpha 1.0.0)\n', '']);
    const after = (await health(hub.url)).servers.find((s) => s.id === 'a') as unknown as Json;
    expect(after.state).toBe('ready');
    expect(Date.parse(after.since as string)).toBeGreaterThan(Date.parse(before.since as string));

    expect(textOf((await slow) as Json)).toBe('slept 3000'); // the old connection drained
    expect(textOf((await client.callTool({ name: 'a__echo', arguments: { text: 'again' } })) as Json)).toBe('echo:again');
    expect(hub.logs.filter((l) => l.includes('server restarted on request'))).toHaveLength(1);

    // A call while it starts again waits for that start (its first attempt), and runs.
    const origin = new URL(hub.url).origin;
    expect((await fetch(`${origin}/admin/servers/a/restart`, { method: 'POST' })).status).toBe(200);
    const during = (await client.callTool({ name: 'a__echo', arguments: { text: 'during' } })) as Json;
    expect([during.isError, textOf(during)]).toEqual([undefined, 'echo:during']);
    await waitForReady(hub.url, ['a']);
    expect(textOf((await client.callTool({ name: 'a__echo', arguments: { text: 'after' } })) as Json)).toBe('echo:after');
    expect((await health(hub.url)).servers.find((s) => s.id === 'c')).toEqual(other);
    await client.close();
    // --no-wait --json answers JSON too (it printed the text line).
    const noWait = await run(['servers', 'restart', 'c', '--no-wait', '--json', '--url', hub.url]);
    expect([noWait.code, JSON.parse(noWait.stdout), noWait.stderr]).toEqual([0, { restarting: 'c' }, '']);
    await waitForReady(hub.url, ['c']);
  });

  it('a server that cannot start says why; once it can, a restart brings it up at once', async () => {
    const failing = await run(['servers', 'restart', 'b', '--url', hub.url]);
    expect(failing.code).toBe(1);
    expect(failing.stdout).toBe('');
    expect(failing.stderr).toMatch(/^switchyard servers restart: restarted "b", but its first attempt failed: .+ \(the hub keeps trying; `switchyard servers` shows how it goes\)\n$/);
    // Why, in the process's own words: the line of its stderr that says it, not only an exit code.
    expect(failing.stderr).toMatch(/process exited with code 1 \(stderr: Error: Cannot find module '[^']*later\.mjs'\)/);
    const listed = { servers: JSON.parse((await run(['servers', '--url', hub.url, '--json'])).stdout) as Json[] };
    expect(listed.servers.find((s) => s.id === 'b')).toMatchObject({ lastError: 'process exited with code 1', stderr: expect.stringMatching(/^Error: Cannot find module/) });
    // For operators only: /healthz (any client may read it) and a client's call do not carry it.
    expect(JSON.stringify(await health(hub.url))).not.toMatch(/Cannot find module/);
    const c = new Client({ name: 'stderr-client', version: '1.0.0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(hub.url)));
    const call = await c.callTool({ name: 'b__echo', arguments: { text: 'x' } }).catch((err: Error) => ({ content: [{ type: 'text', text: err.message }] }));
    expect(textOf(call as Json)).not.toMatch(/Cannot find module|later\.mjs/);
    await c.close();

    writeFileSync(later, `await import(${JSON.stringify(pathToFileURL(join(ROOT, SDK1)).href)});\n`);
    const r = await run(['servers', 'restart', 'b', '--url', hub.url, '--json']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ restarted: 'b', server: { id: 'b', state: 'ready', era: '2025-11-25', lastError: null } });
  }, 60_000); // four CLI processes and a client: at a load of 18 per CPU it ran past 30 s, and its last restart then fell in the next test's count

  it('a --timeout that is no number of seconds above 0, or an empty id, is a usage error (exit 2); nothing restarts', async () => {
    const n = hub.logs.filter((l) => l.includes('server restarted on request')).length;
    // "abc" was NaN, a wait no clock reaches; "" and a negative ended it at once.
    const timeouts = [['abc', 'not a number'], ['-5', 'not -5'], ['', 'not 0'], ['0', 'not 0']];
    const args = (t: string) => ['servers', 'restart', 'a', '--url', hub.url, '--timeout', t];
    // The real process for the first; the others in one (runCliBatch).
    const runs = [
      await run(args(timeouts[0]![0]!)),
      ...(await runCliBatch([...timeouts.slice(1).map(([t]) => ({ args: args(t!) })), { args: ['servers', 'restart', '', '--url', hub.url] }].map((c) => ({ ...c, env: { SWITCHYARD_API_KEY: '' } })))),
    ];
    for (const [t, shown] of timeouts) {
      const r = runs.shift()!;
      // An empty number is refused for every command alike (given-once.ts noEmptyNumber).
      const said = t === '' ? 'switchyard servers restart: --timeout is empty: give a number, or leave the option out (an unset variable in a script?)\n' : `switchyard servers restart: --timeout must be a number of seconds above 0 (${shown}); --no-wait returns at once\n`;
      expect([r.code, r.stdout, r.stderr], t).toEqual([2, '', said]);
    }
    const empty = runs.shift()!;
    expect([empty.code, empty.stdout, empty.stderr]).toEqual([2, '', 'switchyard servers restart: the server id is empty: give one as `switchyard servers` shows it\n']);
    expect(hub.logs.filter((l) => l.includes('server restarted on request'))).toHaveLength(n);
  }, 60_000);

  it('an unknown server, a GET and a bad path are refused; nothing restarts', async () => {
    const n = hub.logs.filter((l) => l.includes('server restarted on request')).length;
    const unknown = await run(['servers', 'restart', 'nope', '--url', hub.url]);
    expect(unknown.code).toBe(1);
    const origin = new URL(hub.url).origin;
    // The daemon's words first, as the command's; its status and address last, once (it led with the route and status).
    expect(unknown.stderr).toBe(`switchyard servers restart: no server "nope" is running (switchyard servers lists them) [HTTP 404 from ${origin}]\n`);
    const get = await fetch(`${origin}/admin/servers/a/restart`);
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
    expect((await fetch(`${origin}/admin/servers/%E0%A4%A/restart`, { method: 'POST' })).status).toBe(400);
    expect((await fetch(`${origin}/admin/servers/a/restart`, { method: 'POST', headers: { origin: 'http://evil.example.com' } })).status).toBe(403);
    expect(hub.logs.filter((l) => l.includes('server restarted on request'))).toHaveLength(n);
  });

  // A disabled server was nowhere to be seen, and a restart of it said it was not running.
  it('a server disabled in the config is listed as disabled, and its restart says so; nothing starts it', async () => {
    const table = await run(['servers', '--url', hub.url]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^off +disabled +- +- +- +- +- +-$/m);
    const restart = await run(['servers', 'restart', 'off', '--url', hub.url]);
    expect(restart.code).toBe(1);
    expect(restart.stderr).toBe(`switchyard servers restart: server "off" is disabled in the config: enable it there and reload [HTTP 404 from ${new URL(hub.url).origin}]\n`);
    expect((await health(hub.url)).servers.map((s) => s.id)).not.toContain('off');
  });
});
