/**
 * failMode and back-pressure through the real hub: a fail-closed server that is down makes the
 * hub refuse every call that acts (lists keep working) until it is back or reconfigured; a
 * legacy session may have only listen.maxPendingPerSession requests in flight.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { legacySession, modernCall, queryRows, SDK1, type Json } from './ledger-helpers.js';
import { callTool, isToolError, rowsFor, serverHealth, text, waitForState, waitUntil } from './faults-helpers.js';

let hub: HubProcess;
let db: string;

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-limits-'));
  hub = await startHub(
    {
      listen: { maxPendingPerSession: 2 },
      servers: {
        ok: nodeServer(SDK1),
        // Never comes up: the process exits at once, every time.
        guard: { command: process.execPath, args: ['-e', 'process.exit(3)'], failMode: 'closed' },
      },
    },
    { dir },
  );
  db = join(hub.dir, 'ledger.db');
  await waitForState(hub.url, 'ok', ['ready']);
}, 30_000);

afterAll(async () => {
  expect(await hub?.stop()).toBe(0);
});

describe('failMode closed', () => {
  it('while the fail-closed server is down, every call is refused naming it; lists still work', async () => {
    const s = await serverHealth(hub.url, 'guard');
    expect(s.state).not.toBe('ready');
    const list = await modernCall(hub.url, 'l1', 'tools/list');
    expect(((list.body?.result?.tools ?? []) as { name: string }[]).map((t) => t.name)).toContain('ok__echo');
    const a = await callTool(hub.url, 'ok__echo', { text: 'hi' });
    expect(isToolError(a)).toBe(true);
    expect(text(a)).toMatch(/refuses calls while server "guard" \(failMode "closed"\) is (starting|restarting|failed): process exited with code 3/);
    const [row] = await rowsFor(db, 'ok__echo');
    expect(row.outcome).toBe('unavailable');
    // Found under its tool's server (and counted under its tool in /metrics); the message names the blocker.
    expect(row.server).toBe('ok');
    const p = await modernCall(hub.url, 'p1', 'prompts/get', { name: 'ok__greet', arguments: { name: 'bob' } });
    expect(p.body?.error?.message).toMatch(/server "guard"/);
    expect(p.body?.error?.code).toBe(-32603);
    // Not "ok" to a load balancer while it answers no call: 503, and why.
    const hz = await fetch(new URL('/healthz', hub.url));
    expect(hz.status).toBe(503);
    expect(await hz.json()).toMatchObject({ status: 'refusing', reason: expect.stringMatching(/refuses calls while server "guard" \(failMode "closed"\)/) });
  });

  it('reconfigured to failMode open (hot reload, no restart of anything), the rest serves again', async () => {
    const before = await serverHealth(hub.url, 'ok');
    const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { servers: Record<string, Json> };
    c.servers.guard.failMode = 'open';
    writeFileSync(hub.configFile, JSON.stringify(c));
    await waitUntil('reload', async () => hub.logs.some((l) => l.includes('config reloaded') && l.includes('"updated":["guard"]')));
    const a = await callTool(hub.url, 'ok__echo', { text: 'open' });
    expect(text(a)).toBe('echo:open');
    expect((await serverHealth(hub.url, 'ok')).since).toBe(before.since);
    const hz = await fetch(new URL('/healthz', hub.url));
    expect(hz.status).toBe(200);
    expect(((await hz.json()) as { status: string }).status).toBe('ok');
  });

  // The hub counts its fail-closed servers as their handles change, and a call looks for a
  // blocker only while there is one (issue #9): the reload that makes one fail closed again
  // must count it, its state still read at each call.
  it('reconfigured to failMode closed again (hot reload), every call is refused again', async () => {
    const reconfigured = async (failMode: string, reloads: number) => {
      const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { servers: Record<string, Json> };
      c.servers.guard.failMode = failMode;
      writeFileSync(hub.configFile, JSON.stringify(c));
      await waitUntil('reload', async () => hub.logs.filter((l) => l.includes('config reloaded') && l.includes('"updated":["guard"]')).length === reloads);
    };
    await reconfigured('closed', 2);
    const a = await callTool(hub.url, 'ok__echo', { text: 'closed' });
    expect([isToolError(a), text(a)]).toEqual([true, expect.stringMatching(/refuses calls while server "guard" \(failMode "closed"\)/)]);
    // Open again for the tests below, which need calls that run.
    await reconfigured('open', 3);
    expect(text(await callTool(hub.url, 'ok__echo', { text: 'open' }))).toBe('echo:open');
  });
});

// At once: each test starts hubs of its own and mostly waits for a server held starting.
describe.concurrent('failMode closed, a server still starting', () => {
  it('/healthz says "starting", not "refusing", in the start-up grace (SWITCHYARD_STARTUP_GRACE_MS; with 0, "refusing" at once); a call given up on in it is cancelled; many requests share its wait', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-starting-'));
    const slow = nodeServer(SDK1);
    const servers = {
      ok: nodeServer(SDK1),
      guard: { ...slow, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(slow.args as string[])], env: { START_DELAY_MS: '1500' }, failMode: 'closed' },
    };
    // A grace longer than any start here: the hub is seen in it however loaded the machine is.
    // And one with none, started alongside.
    const [starting, none] = await Promise.all([startHub({ servers }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '30000' } }), startHub({ servers }, { env: { SWITCHYARD_STARTUP_GRACE_MS: '0' } })]);
    try {
      // No grace: a call is refused while the fail-closed server starts, and /healthz says so.
      const hz0 = await fetch(new URL('/healthz', none.url));
      const body0 = (await hz0.json()) as { status: string; servers: { id: string; state: string }[] };
      if (body0.servers.find((s) => s.id === 'guard')?.state === 'starting') {
        expect([hz0.status, body0.status]).toEqual([503, 'refusing']);
        expect(text(await callTool(none.url, 'ok__echo', { text: 'x' }))).toMatch(/refuses calls while server "guard" \(failMode "closed"\) is starting/);
      } else console.warn('faults-limits: the fail-closed server was ready before the first /healthz; not checked');
      const hz = await fetch(new URL('/healthz', starting.url));
      const body = (await hz.json()) as { status: string; reason?: string; servers: { id: string; state: string }[] };
      if (body.servers.find((s) => s.id === 'guard')?.state === 'starting') {
        expect(hz.status).toBe(503);
        // The reason says the grace in force, not the default's 3 s.
        expect(body).toMatchObject({ status: 'starting', reason: expect.stringContaining('server "guard" (failMode "closed") to be ready, up to 30 s from the hub\'s start') });
        // A call its client gives up on while it waits is recorded cancelled (it was recorded
        // unavailable: refused for the fail-closed server, which its client never heard).
        const ac = new AbortController();
        const gaveUp = callTool(starting.url, 'ok__echo', { text: 'gave up' }, undefined, ac.signal);
        await new Promise((r) => setTimeout(r, 150));
        ac.abort();
        await expect(gaveUp).rejects.toThrow();
        const [row] = await rowsFor(join(dir, 'ledger.db'), 'ok__echo');
        expect(row.outcome).toBe('cancelled');
        // Many requests waiting at once share one wait: each added its own listener to every
        // starting server (Node's MaxListenersExceededWarning on the hub's stderr past ten).
        const lists = await Promise.all(Array.from({ length: 12 }, (_, i) => modernCall(starting.url, `l${i}`, 'tools/list')));
        expect(lists.map((l) => (l.body?.result?.tools as unknown[] | undefined)?.length)).toEqual(Array(12).fill(10));
        expect(starting.logs.filter((l) => l.includes('MaxListeners'))).toEqual([]);
      } else console.warn('faults-limits: the fail-closed server was ready before the first /healthz; not checked');
    } finally {
      await Promise.all([starting.stop(), none.stop()]);
    }
  });

  it('in the grace, a call, prompt or prompt completion by a name only a ready server has goes on at once; while a fail-closed server starts it waits for that server alone', async () => {
    // ok: ready at once. guard (failMode closed) and late (open): held starting by their files,
    // whatever the machine's load; the grace (30 s) outlasts the test.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-grace-'));
    const held = (hold: string, extra: Json = {}) => {
      const s = nodeServer(SDK1);
      writeFileSync(hold, '');
      return { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])], env: { START_HOLD_FILE: hold }, ...extra };
    };
    const [guardHold, lateHold] = [join(dir, 'guard.hold'), join(dir, 'late.hold')];
    const h = await startHub({ servers: { ok: nodeServer(SDK1), guard: held(guardHold, { failMode: 'closed' }), late: held(lateHold) } }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '30000' } });
    try {
      await waitForState(h.url, 'ok', ['ready']);
      // The fail-closed server starting: the call waits in the grace (not refused, as past it).
      let answered = false;
      const waits = callTool(h.url, 'ok__echo', { text: 'waited' }).finally(() => (answered = true));
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toBe(false);
      rmSync(guardHold);
      // guard ready: the call that waited for it goes on, while late still starts (it was held
      // for late too, the grace's wait being one for all: here until the grace's end, 30 s).
      let timer: NodeJS.Timeout | undefined;
      const w = await Promise.race([waits, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 15_000)))]).finally(() => clearTimeout(timer)); // half the grace
      expect(w && [isToolError(w), text(w)], JSON.stringify(w?.body)).toEqual([false, 'echo:waited']);
      expect((await serverHealth(h.url, 'late'))?.state).toBe('starting');
      // Only an open server starting now (late): a call, a prompt and a completion of its
      // argument of ok's go on, not held for the rest of the grace (30 s) as they were. A list
      // still waits for late, and so does a completion of a resource template's argument: late
      // lists the same template (sdk1://item/{id}), and may take it.
      const t0 = Date.now();
      const c = await callTool(h.url, 'ok__echo', { text: 'at once' });
      expect([isToolError(c), text(c)], JSON.stringify(c.body)).toEqual([false, 'echo:at once']);
      const p = await modernCall(h.url, 'p1', 'prompts/get', { name: 'ok__greet', arguments: { name: 'x' } });
      expect(JSON.stringify(p.body?.result?.messages), JSON.stringify(p.body)).toContain('Hello, x!');
      const cc = await modernCall(h.url, 'c1', 'completion/complete', { ref: { type: 'ref/prompt', name: 'ok__greet' }, argument: { name: 'name', value: 'al' } });
      expect((cc.body?.result?.completion as Json | undefined)?.values, JSON.stringify(cc.body)).toEqual(['alice', 'albert']);
      expect(Date.now() - t0).toBeLessThan(15_000); // half the grace
      let listed = false;
      let completed = false;
      const list = modernCall(h.url, 'l1', 'tools/list').finally(() => (listed = true));
      const template = modernCall(h.url, 'c2', 'completion/complete', { ref: { type: 'ref/resource', uri: 'sdk1://item/{id}' }, argument: { name: 'id', value: '' } }).finally(() => (completed = true));
      await new Promise((r) => setTimeout(r, 300));
      expect([listed, completed, (await serverHealth(h.url, 'late'))?.state]).toEqual([false, false, 'starting']);
      rmSync(lateHold);
      expect(((await list).body?.result?.tools as Json[]).filter((t) => String(t.name).startsWith('late__')).length).toBeGreaterThan(0);
      const tc = await template;
      expect(tc.body?.result ?? tc.body?.error, JSON.stringify(tc.body)).toBeDefined();
    } finally {
      await h.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('in the grace, calls held by a fail-closed server starting are refused once its first attempt fails, not at the end of the wait for the others', async () => {
    // ok: ready at once. guard (failMode closed): exits with code 3 once its file is gone; late
    // (open): held starting by its file all the while. The grace (30 s) outlasts the test.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-grace-fails-'));
    const [guardHold, lateHold] = [join(dir, 'guard.hold'), join(dir, 'late.hold')];
    writeFileSync(guardHold, '');
    writeFileSync(lateHold, '');
    const delay = join(ROOT, 'test/fixtures/start-delay.mjs');
    const s = nodeServer(SDK1);
    const servers = {
      ok: nodeServer(SDK1),
      guard: { command: process.execPath, args: ['--import', delay, '-e', 'process.exit(3)'], env: { START_HOLD_FILE: guardHold }, failMode: 'closed' },
      late: { ...s, args: ['--import', delay, ...(s.args as string[])], env: { START_HOLD_FILE: lateHold } },
    };
    const h = await startHub({ servers }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '30000' } });
    try {
      await waitForState(h.url, 'ok', ['ready']);
      // A call by a ready server's name (held for guard alone), a prompt, and a read (held for
      // every server starting, as lists are): all wait while guard starts.
      let answered = 0;
      const call = callTool(h.url, 'ok__echo', { text: 'held' }).finally(() => answered++);
      const prompt = modernCall(h.url, 'p1', 'prompts/get', { name: 'ok__greet', arguments: { name: 'x' } }).finally(() => answered++);
      const read = modernCall(h.url, 'r1', 'resources/read', { uri: 'sdk1://static/hello' }).finally(() => answered++);
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toBe(0);
      rmSync(guardHold);
      // guard failed: each is refused then, as past the grace, not once late is ready (without
      // the fix: held until the grace's end, 30 s, late never being let start here).
      let timer: NodeJS.Timeout | undefined;
      const all = Promise.all([call, prompt, read]);
      const got = await Promise.race([all, new Promise<undefined>((r) => (timer = setTimeout(() => r(undefined), 15_000)))]).finally(() => clearTimeout(timer)); // half the grace
      expect(got, 'answered before half the grace').toBeDefined();
      const [c, p, r] = got!;
      expect([isToolError(c), text(c)], JSON.stringify(c.body)).toEqual([true, expect.stringMatching(/refuses calls while server "guard" \(failMode "closed"\) is \w+: process exited with code 3/)]);
      const [row] = await rowsFor(join(dir, 'ledger.db'), 'ok__echo');
      expect([row.outcome, row.errorMessage]).toEqual(['unavailable', text(c)]);
      for (const e of [p, r]) expect([e.body?.error?.code, e.body?.error?.message], JSON.stringify(e.body)).toEqual([-32603, expect.stringMatching(/server "guard" \(failMode "closed"\)/)]);
      expect((await serverHealth(h.url, 'late'))?.state).toBe('starting');
      // A call made now (guard past its first attempt, retrying) is refused at once too.
      const t0 = Date.now();
      const again = await callTool(h.url, 'ok__echo', { text: 'again' });
      expect(text(again)).toMatch(/refuses calls while server "guard"/);
      expect(Date.now() - t0).toBeLessThan(15_000);
    } finally {
      await h.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('in the grace, a completion of a ready server\'s prompt is not held at the edge for want of a server offering completions; one no server shown can answer is refused at once', async () => {
    // m: ready, offers prompts but no completions. late: offers completions (SDK v1), held
    // starting by its file; never seen, it counts only with the list families meanwhile. The
    // group "mine" shows m alone. The grace (30 s) outlasts the test.
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-faults-grace-complete-'));
    const lateHold = join(dir, 'late.hold');
    writeFileSync(lateHold, '');
    const s = nodeServer(SDK1);
    const servers = {
      m: nodeServer('test/fixtures/catalog/mutable-server.mjs', [], { ERA: 'modern', PROMPTS: '1' }),
      late: { ...s, args: ['--import', join(ROOT, 'test/fixtures/start-delay.mjs'), ...(s.args as string[])], env: { START_HOLD_FILE: lateHold } },
    };
    const h = await startHub({ groups: { mine: { servers: ['m'] } }, servers }, { dir, env: { SWITCHYARD_STARTUP_GRACE_MS: '30000' } });
    const mine = h.url.replace(/\/mcp$/, '/mcp/mine');
    try {
      await waitForState(h.url, 'm', ['ready']);
      const complete = (url: string, id: string, ref: Json, name: string) => modernCall(url, id, 'completion/complete', { ref, argument: { name, value: 'al' } });
      // Held until late is ready: a completion of late's prompt, and of a resource template's
      // argument (late may list it): what they get depends on late.
      let held = 0;
      const ofLate = complete(h.url, 'c-late', { type: 'ref/prompt', name: 'late__greet' }, 'name').finally(() => held++);
      const ofTemplate = complete(h.url, 'c-template', { type: 'ref/resource', uri: 'sdk1://item/{id}' }, 'id').finally(() => held++);
      const t0 = Date.now();
      // m's prompt: m completes nothing, whatever late offers. Answered at once (was: held at the
      // edge to the grace's end, 30 s, to learn whether late offers completions).
      const ofM = await complete(h.url, 'c-m', { type: 'ref/prompt', name: 'm__greet' }, 'who');
      expect(ofM.body?.result, JSON.stringify(ofM.body)).toMatchObject({ completion: { values: [] } });
      // On /mcp/mine no server still starting is shown: none can offer completions there by the
      // grace's end, so -32601 at once (was: after the grace).
      const onMine = await complete(mine, 'c-mine', { type: 'ref/prompt', name: 'm__greet' }, 'who');
      expect(onMine.body?.error?.code, JSON.stringify(onMine.body)).toBe(-32601);
      expect(Date.now() - t0).toBeLessThan(15_000); // half the grace
      expect([held, (await serverHealth(h.url, 'late'))?.state]).toEqual([0, 'starting']);
      rmSync(lateHold);
      expect(((await ofLate).body?.result?.completion as Json | undefined)?.values, JSON.stringify((await ofLate).body)).toEqual(['alice', 'albert']);
      expect((await ofTemplate).body?.result?.completion, JSON.stringify((await ofTemplate).body)).toBeDefined();
    } finally {
      await h.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('/healthz says "refusing", not "starting", in the grace once the first attempt has failed: calls no longer wait then', async () => {
    // e62b6d2, 7866eca: a fail-closed server whose first attempt failed is `starting` again (or
    // `restarting`) with its reason, and calls are refused at once, so "starting" would be untrue.
    const started = await startHub({ servers: { guard: { command: process.execPath, args: ['-e', 'process.exit(3)'], failMode: 'closed' } } });
    try {
      // The hub's grace runs from its start, after its first log line (the ledger's, logged as it
      // opens): read from there, not from the spawn, a node loaded by other work takes seconds for.
      const bootAt = (JSON.parse(started.logs[0]!) as { time: number }).time;
      const h = await waitUntil('a failed attempt', async () => {
        const res = await fetch(new URL('/healthz', started.url));
        const body = (await res.json()) as { status: string; servers: { id: string; lastError: string | null }[] };
        return body.servers[0]?.lastError ? { status: res.status, body, at: Date.now() } : undefined;
      }, 5_000);
      if (h.at - bootAt < 2_800) {
        expect(h.status).toBe(503);
        expect(h.body.status).toBe('refusing');
      } else console.warn('faults-limits: the hub started too slowly to see its start-up grace; /healthz not checked');
    } finally {
      await started.stop();
    }
  });
});

describe('back-pressure on a legacy session', () => {
  it('refuses requests past maxPendingPerSession at once (429, -32000) and audits them', async () => {
    const s = await legacySession(hub.url);
    const slow = [s.call(1, 'tools/call', { name: 'ok__slow', arguments: { ms: 800 } }), s.call(2, 'tools/call', { name: 'ok__slow', arguments: { ms: 800 } })];
    await new Promise((r) => setTimeout(r, 150));
    const t0 = Date.now();
    const third = await s.call(3, 'tools/call', { name: 'ok__echo', arguments: { text: 'third' } });
    // A request that waited for a free place would end with a 200 once a slow call ended; the
    // bound only rules out a hang.
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe('1');
    expect(third.body?.error?.code).toBe(-32000);
    expect(third.body?.error?.message).toMatch(/too many requests in flight on this session \(the limit is 2\)/);
    for (const r of await Promise.all(slow)) expect(r.body?.result?.content).toEqual([{ type: 'text', text: 'slept 800' }]);
    const fourth = await s.call(4, 'tools/call', { name: 'ok__echo', arguments: { text: 'fourth' } });
    expect(fourth.body?.result?.content).toEqual([{ type: 'text', text: 'echo:fourth' }]);
    const denied = await waitUntil('denied row', async () => (await queryRows(db, { outcome: 'denied' })).find((r) => /too many requests/.test(r.errorMessage ?? '')));
    expect(denied.method).toBe('tools/call');
    expect(denied.errorCode).toBe(-32000);
    // Named by its tool, as every call's row is, so `ledger query --tool` finds it (it was null).
    expect(denied.tool).toBe('ok__echo');
  });

  it("a call refused at the edge (a header that does not match, an unknown session) is found by its tool's name", async () => {
    const r = await modernCall(hub.url, 'edge-1', 'tools/call', { name: 'ok__edge', arguments: {} }, { headers: { 'mcp-method': 'tools/list' } });
    expect([r.status, r.body?.error?.code]).toEqual([400, -32020]);
    const res = await fetch(hub.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': 'no-such-session' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'edge-2', method: 'tools/call', params: { name: 'ok__edge', arguments: {} } }),
    });
    expect(res.status).toBe(404);
    const rows = await rowsFor(db, 'ok__edge', 2);
    expect(rows.map((x) => [x.requestId, x.errorCode]).sort()).toEqual([
      ['edge-1', -32020],
      ['edge-2', -32001],
    ]);
  });
});
