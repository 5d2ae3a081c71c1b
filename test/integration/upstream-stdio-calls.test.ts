/**
 * Calls through stdio upstreams of both eras, against real child processes: envelopes, ids,
 * progress, timeouts, cancellation, server-to-client requests, logs, notifications, framing
 * faults, crashes and restarts.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger, type Logger } from '../../src/log.js';
import { RpcError } from '../../src/protocol/errors.js';
import type { ProgressInfo } from '../../src/protocol/types.js';
import { createUpstream, type UpstreamOptions } from '../../src/upstream/index.js';
import type { Upstream, UpstreamSpec, UpstreamState } from '../../src/upstream/types.js';
import { captureLogger, perProcess, quirkLog, quirkSpec, ROOT, tmpDir, waitFor } from './upstream-helpers.js';
import { alive } from '../helpers/procs.js';
import { holdLoop, holdLoopAfterPoll } from '../helpers/hold-loop.js';

const open: Upstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((u) => u.close()));
});

async function started(spec: UpstreamSpec, log: Logger = silentLogger, opts: UpstreamOptions = {}): Promise<Upstream> {
  const u = createUpstream(spec, log, { backoff: { baseMs: 50 }, ...opts });
  open.push(u);
  await u.start();
  return u;
}

const text = (r: Record<string, unknown>): string => (r.content as { text: string }[])[0].text;

describe.each([
  ['legacy', 'legacy-32601'],
  ['modern', 'modern'],
])('%s stdio calls', (era, fixture) => {
  it('maps fresh monotonic upstream ids back to each caller', async () => {
    const spec = quirkSpec(fixture);
    const u = await started(spec);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => u.request('tools/call', { name: 'echo', arguments: { i } })));
    results.forEach((r, i) => expect(r.structuredContent).toMatchObject({ args: { i } }));
    const ids = perProcess(spec.logFile)[0]
      .filter((m) => m.method === 'tools/call')
      .map((m) => m.id as number);
    expect(new Set(ids).size).toBe(20);
    expect(ids.every((id) => typeof id === 'number' && id > 0)).toBe(true);
  });

  it('writes a lone call at once, and the calls sent together in one write', async () => {
    const u = await started(quirkSpec(fixture));
    const write = vi.spyOn(Socket.prototype, 'write');
    const frames = (tag: string) => write.mock.calls.map(([chunk]) => String(chunk)).filter((t) => t.includes(tag));
    try {
      const lone = u.request('tools/call', { name: 'echo', arguments: { lone: 1 } });
      // Before the turn ends: a frame that waited to be joined would not be written yet.
      await new Promise((r) => setImmediate(r));
      expect(frames('"lone":1')).toHaveLength(1);
      await lone;
      const many = Promise.all(Array.from({ length: 10 }, (_, i) => u.request('tools/call', { name: 'echo', arguments: { many: i } })));
      await new Promise((r) => setTimeout(r, 20));
      const writes = frames('"many":');
      // The first goes alone (nothing else in flight yet); the other nine leave together.
      expect(writes.length).toBeLessThanOrEqual(2);
      expect(writes.join('').split('"many":').length - 1).toBe(10);
      (await many).forEach((r, i) => expect(r.structuredContent).toMatchObject({ args: { many: i } }));
    } finally {
      write.mockRestore();
    }
  });

  it('rejects with the RpcError the upstream answered', async () => {
    const u = await started(quirkSpec(fixture));
    const err = await u.request('tools/call', { name: 'nope' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcError);
    expect(err).toMatchObject({ code: -32602, message: 'unknown tool nope' });
  });

  it('routes progress to the call that asked for it and resets the timeout on each update', async () => {
    const u = await started(quirkSpec(fixture));
    const a: ProgressInfo[] = [];
    const b: ProgressInfo[] = [];
    // 6 steps 100 ms apart outlast the 250 ms timeout only because progress resets it.
    const [ra, rb] = await Promise.all([
      u.request('tools/call', { name: 'slow', arguments: { steps: 6, interval: 100 } }, { timeoutMs: 250, onProgress: (p) => a.push(p) }),
      u.request('tools/call', { name: 'slow', arguments: { steps: 2, interval: 20 } }, { onProgress: (p) => b.push(p) }),
    ]);
    expect(text(ra)).toBe('slow done');
    expect(text(rb)).toBe('slow done');
    expect(a.map((p) => p.progress)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(a[0]).toEqual({ progress: 1, total: 6, message: 'step 1' });
    expect(b.map((p) => p.progress)).toEqual([1, 2]);
  });

  it("has credentials in a progress message redacted before the call's client sees it, as in a log line", async () => {
    const u = await started(quirkSpec(fixture));
    const seen: ProgressInfo[] = [];
    const token = 'ghp_' + 'a1B2c3D4e5'.repeat(4).slice(0, 36);
    await u.request('tools/call', { name: 'slow', arguments: { steps: 1, interval: 10, message: `cloning with ${token}` } }, { onProgress: (p) => seen.push(p) });
    expect(seen).toEqual([{ progress: 1, total: 1, message: 'cloning with [redacted:github-token] 1' }]);
  });

  it('times out, cancels upstream with the upstream id, and keeps working', async () => {
    const spec = quirkSpec(fixture);
    const u = await started(spec);
    const t0 = Date.now();
    const err = await u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 5000 } }, { timeoutMs: 200 }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'TimeoutError', kind: 'timeout', ms: 200 });
    expect(Date.now() - t0).toBeLessThan(3000); // not the tool's 5 s
    await waitFor(() => quirkLog(spec.logFile).some((e) => e.in?.method === 'notifications/cancelled'), 2000, 'cancel');
    const msgs = perProcess(spec.logFile)[0];
    const call = msgs.find((m) => m.method === 'tools/call' && (m.params as { name: string }).name === 'slow')!;
    const cancel = msgs.find((m) => m.method === 'notifications/cancelled')!;
    expect(cancel.params).toEqual({ requestId: call.id, reason: 'timed out after 200 ms' });
    expect(await u.request('tools/call', { name: 'echo', arguments: {} })).toMatchObject({ structuredContent: { args: {} } });
  });

  it('cancels on abort with notifications/cancelled and rejects with CancelledError', async () => {
    const spec = quirkSpec(fixture);
    const u = await started(spec);
    const ctl = new AbortController();
    const p = u.request('tools/call', { name: 'slow', arguments: { steps: 100, interval: 50 } }, { signal: ctl.signal, onProgress: () => ctl.abort('user gave up') });
    await expect(p).rejects.toMatchObject({ name: 'CancelledError', message: 'user gave up' });
    await waitFor(() => quirkLog(spec.logFile).some((e) => e.in?.method === 'notifications/cancelled'), 2000, 'cancel');
    const cancel = perProcess(spec.logFile)[0].find((m) => m.method === 'notifications/cancelled')!;
    expect(cancel.params).toMatchObject({ reason: 'user gave up' });
    // An already-aborted signal never reaches the upstream.
    await expect(u.request('tools/call', { name: 'echo' }, { signal: AbortSignal.abort() })).rejects.toMatchObject({ name: 'CancelledError' });
  });

  it('gives back its one slot however a call ends (maxConcurrent 1, maxQueue 0)', async () => {
    const u = await started(quirkSpec(fixture, { maxConcurrent: 1, maxQueue: 0 }));
    const echo = () => u.request('tools/call', { name: 'echo', arguments: {} });
    const busy = { name: 'UpstreamUnavailableError', state: 'busy' };
    // While a call runs, the slot is taken.
    const running = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } });
    await expect(echo()).rejects.toMatchObject(busy);
    await running;
    // An answer, an error answer, a timeout, an abort, a frame that cannot be made: each frees it.
    await echo();
    await expect(u.request('tools/call', { name: 'nope' })).rejects.toBeInstanceOf(RpcError);
    await echo();
    await expect(u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 5000 } }, { timeoutMs: 100 })).rejects.toMatchObject({ name: 'TimeoutError' });
    await echo();
    const ctl = new AbortController();
    const aborted = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 5000 } }, { signal: ctl.signal });
    ctl.abort('enough');
    await expect(aborted).rejects.toMatchObject({ name: 'CancelledError' });
    await echo();
    await expect(u.request('tools/call', { name: 'echo', arguments: { n: 1n } })).rejects.toThrow(/BigInt/);
    await expect(echo()).resolves.toMatchObject({ structuredContent: { args: {} } });
    // The hub's own request holding it (a subscription renewed; here a slow call marked so):
    // a call waits for it, not refused "busy" for what no client asked.
    const own = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } }, { hubOwn: true });
    await expect(echo()).resolves.toMatchObject({ structuredContent: { args: {} } });
    await own;
    // The hub's own fetch of a list takes no slot: not counted in load (/healthz inFlight), and
    // fetched while a call holds the one there is (it was refused "busy", the stale list served).
    const listing = u.request('tools/list', {});
    expect(u.load).toEqual({ active: 0, queued: 0 });
    await listing;
    const holding = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } });
    await expect(u.request('tools/list', {})).resolves.toHaveProperty('tools');
    expect(u.load).toEqual({ active: 1, queued: 0 });
    // The hub's own request (a subscription renewed as the server came back, a task cancelled)
    // finding the slot held by a client's call waits for it past maxQueue, within its own
    // timeout: it was refused "busy", and a renewal lost so left its clients without updates.
    const renewing = u.request('tools/call', { name: 'echo', arguments: { own: 1 } }, { hubOwn: true });
    expect(u.load).toEqual({ active: 1, queued: 1 });
    await expect(renewing).resolves.toMatchObject({ structuredContent: { args: { own: 1 } } });
    await holding;
    // Bounded by its own timeout, as a client's wait is.
    const held = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 400 } });
    await expect(u.request('tools/call', { name: 'echo', arguments: {} }, { hubOwn: true, timeoutMs: 50 })).rejects.toMatchObject({ name: 'UpstreamUnavailableError', state: 'busy' });
    await held;
  });

  it('queued calls take the one slot in turn, and each gives it back however it ends', async () => {
    const u = await started(quirkSpec(fixture, { maxConcurrent: 1, maxQueue: 4 }));
    const slow = (ms: number, timeoutMs = 5000) => u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms } }, { timeoutMs });
    const first = slow(100);
    // The hub's own request waiting takes none of maxQueue's places: four calls still wait.
    const own = u.request('tools/call', { name: 'echo', arguments: { own: 1 } }, { hubOwn: true });
    const queued = [u.request('tools/call', { name: 'echo', arguments: { i: 1 } }), u.request('tools/call', { name: 'nope' }), slow(5000, 150), u.request('tools/call', { name: 'echo', arguments: { i: 2 } })];
    expect(u.load).toEqual({ active: 1, queued: 5 });
    await expect(u.request('tools/call', { name: 'echo', arguments: {} })).rejects.toMatchObject({ name: 'UpstreamUnavailableError', state: 'busy' });
    const settled = await Promise.allSettled([first, own, ...queued]);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'rejected', 'fulfilled']);
    expect(u.load).toEqual({ active: 0, queued: 0 });
    await expect(u.request('tools/call', { name: 'echo', arguments: {} })).resolves.toMatchObject({ structuredContent: { args: {} } });
  });

  it('a call that ran alone (exclusive) and timed out lets the next calls in', async () => {
    const u = await started(quirkSpec(fixture));
    const alone = { exclusive: true, timeoutMs: 100 };
    await expect(u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 5000 } }, alone)).rejects.toMatchObject({ name: 'TimeoutError' });
    const shared = await Promise.all([1, 2].map((i) => u.request('tools/call', { name: 'echo', arguments: { i } }, { timeoutMs: 1000 })));
    expect(shared.map((r) => r.structuredContent)).toMatchObject([{ args: { i: 1 } }, { args: { i: 2 } }]);
    await expect(u.request('tools/call', { name: 'echo', arguments: {} }, { exclusive: true, timeoutMs: 1000 })).resolves.toBeDefined();
  }, 5_000); // calls waiting at the gate have no timer of their own: a gate never left would hang

  it('emits notifications that belong to no call', async () => {
    const u = await started(quirkSpec(fixture));
    const seen: { method: string }[] = [];
    u.on('notification', (n: { method: string }) => seen.push(n));
    await u.request('tools/call', { name: 'changed' });
    expect(seen).toEqual([{ method: 'notifications/tools/list_changed', params: {} }]);
  });

  it('is unavailable before start and after close', async () => {
    const u = createUpstream(quirkSpec(fixture), silentLogger);
    await expect(u.request('tools/list', {})).rejects.toMatchObject({ name: 'UpstreamUnavailableError', state: 'starting' });
    await u.start();
    await u.close();
    expect(u.state).toBe('stopped');
    await expect(u.request('tools/list', {})).rejects.toMatchObject({ name: 'UpstreamUnavailableError', state: 'stopped' });
  });
});

describe('connections sharing one limit (principals\' own, src/auth/upstream-pool.ts)', () => {
  it("a call on one waits for the hub's own request on another, as on its own: neither refused \"busy\" nor taking a client's place", async () => {
    // Two principals' own processes, their slots the server's (maxConcurrent 1, maxQueue 0), as the pool makes them.
    const a = await started(quirkSpec('legacy-32601', { maxConcurrent: 1, maxQueue: 0 }));
    const b = await started(quirkSpec('legacy-32601', { limiter: a.limiter }));
    const busy = { name: 'UpstreamUnavailableError', state: 'busy' };
    // The hub's own request on A's connection (a subscription renewed; here a slow call marked so)
    // holds the one slot: a client's call on B's waits for it, as it would on A's.
    const own = a.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } }, { hubOwn: true });
    const waiting = b.request('tools/call', { name: 'echo', arguments: { b: 1 } });
    expect(a.load).toEqual({ active: 1, queued: 1 });
    // One place past maxQueue per slot the hub's own requests hold, whichever connection: a second call is refused.
    await expect(a.request('tools/call', { name: 'echo', arguments: {} })).rejects.toMatchObject(busy);
    await expect(waiting).resolves.toMatchObject({ structuredContent: { args: { b: 1 } } });
    await own;
    // Handed the slot from a waiter: the hub's own request that waited holds it as its own too.
    const client = a.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } });
    const renewing = b.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } }, { hubOwn: true });
    await client;
    expect(a.load).toEqual({ active: 1, queued: 0 });
    await expect(a.request('tools/call', { name: 'echo', arguments: { a: 2 } })).resolves.toMatchObject({ structuredContent: { args: { a: 2 } } });
    await renewing;
    // Given back, the allowance with it: a client's call finding a client's call in the slot is refused.
    const held = b.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } });
    await expect(a.request('tools/call', { name: 'echo', arguments: {} })).rejects.toMatchObject(busy);
    await held;
    expect(a.load).toEqual({ active: 0, queued: 0 });
  });
});

describe('envelopes', () => {
  const meta = { traceparent: '00-abc-def-01', 'com.example/x': 1 };

  it('modern: the required envelope, the caller capabilities, log level and pass-through keys', async () => {
    const u = await started(quirkSpec('modern'));
    const r = await u.request(
      'tools/call',
      { name: 'echo', arguments: { a: 1 }, _meta: { baggage: 'k=v', 'io.modelcontextprotocol/protocolVersion': 'forged' } },
      {
        clientCapabilities: { elicitation: { form: {} } },
        logLevel: 'warning',
        meta: { ...meta, progressToken: 'forged', 'dev.switchyard/idempotency-key': 'k1' },
        onProgress: () => undefined,
      },
    );
    const seen = (r.structuredContent as { meta: Record<string, unknown> }).meta;
    expect(seen).toEqual({
      baggage: 'k=v',
      ...meta,
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
      'io.modelcontextprotocol/clientInfo': { name: 'switchyard', version: expect.any(String) },
      'io.modelcontextprotocol/logLevel': 'warning',
      progressToken: expect.stringMatching(/^sy-/),
    });
    expect(seen.progressToken).not.toBe('forged');
  });

  it('modern: clientCapabilities default to {}', async () => {
    const u = await started(quirkSpec('modern'));
    const r = await u.request('tools/call', { name: 'echo' });
    expect((r.structuredContent as { meta: Record<string, unknown> }).meta['io.modelcontextprotocol/clientCapabilities']).toEqual({});
  });

  it("modern: a legacy client's roots.listChanged is not declared (2026-07-28 roots are {})", async () => {
    const u = await started(quirkSpec('modern'));
    const caps = { roots: { listChanged: true }, sampling: {} };
    const r = await u.request('tools/call', { name: 'echo' }, { clientCapabilities: caps });
    expect((r.structuredContent as { meta: Record<string, unknown> }).meta['io.modelcontextprotocol/clientCapabilities']).toEqual({ roots: {}, sampling: {} });
    expect(caps.roots).toEqual({ listChanged: true }); // the client's own object is left as it is
  });

  it('legacy: only pass-through keys, and no _meta at all when there are none', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const r = await u.request('tools/call', { name: 'echo' }, { meta, logLevel: 'debug', clientCapabilities: { sampling: {} } });
    expect((r.structuredContent as { meta: unknown }).meta).toEqual(meta);
    const bare = await u.request('tools/call', { name: 'echo' });
    expect((bare.structuredContent as { meta: unknown }).meta).toBeNull();
  });
});

describe('server-to-client requests from a legacy stdio upstream', () => {
  it('routes elicitation to the only call that can answer it, pausing its timeout meanwhile', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const asked: unknown[] = [];
    const r = await u.request('tools/call', { name: 'elicit' }, {
      timeoutMs: 200,
      onServerRequest: async (req) => {
        asked.push(req);
        await new Promise((res) => setTimeout(res, 400));
        return { action: 'accept', content: { name: 'Ada' } };
      },
    });
    expect(asked).toEqual([{ method: 'elicitation/create', params: expect.objectContaining({ mode: 'form', message: 'name?' }) }]);
    expect(JSON.parse(text(r))).toEqual({ action: 'accept', content: { name: 'Ada' } });
  });

  it("is not taken for hung while it waits, silent, for the client's answer, however long the client takes", async () => {
    // Answers nothing else (a ping included) until the client answered: a server that waits in line.
    const src = IN_LINE_SERVER;
    const u = await started({ id: 'in-line', command: process.execPath, args: ['-e', src], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 100 });
    u.retime({ timeoutMs: 300 }); // once started: a loaded machine took more than 300 ms to answer initialize
    // Its health check, silent 100 ms and then 300 ms more, ended it while the user was still answering.
    // The call's own limit long (a loaded machine may take a while to get the question out); the ping's is 300 ms.
    const r = await u.request('tools/call', { name: 'ask' }, { timeoutMs: 10_000, onServerRequest: () => new Promise((res) => setTimeout(() => res({ action: 'accept', content: {} }), 1000)) });
    expect(text(r)).toBe('answered');
    expect(u.restarts).toBe(0);
  });

  it("calls timing out while another waits for the client's answer are no hung server: the process is not ended under the user", async () => {
    // Takes its calls one at a time: the others wait in line behind the one asking the user.
    const src = IN_LINE_SERVER;
    const u = await started({ id: 'in-line', command: process.execPath, args: ['-e', src], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 0 });
    // Shortened once started: a loaded machine may take longer to answer its initialize.
    u.retime({ timeoutMs: 300 });
    let answer!: () => void;
    const asked = new Promise<void>((res) => (answer = res));
    let reply!: (r: Record<string, unknown>) => void;
    const ask = u.request('tools/call', { name: 'ask' }, { onServerRequest: () => (answer(), new Promise((res) => (reply = res))) });
    await asked;
    // Three calls in line behind it, each out of time (the server's own 300 ms) while the user thinks.
    const late = await Promise.allSettled([1, 2, 3].map(() => u.request('tools/call', { name: 'other' })));
    for (const l of late) expect(l.status === 'rejected' && String(l.reason)).toMatch(/did not answer within 300 ms/);
    // Before, those three ended the process as one that answers no calls, and the user's answer with it.
    reply({ action: 'accept', content: {} });
    expect(text(await ask)).toBe('answered');
    expect(u.restarts).toBe(0);
    expect(u.state).toBe('ready');
  });

  it('maxTotalTimeoutMs below timeoutMs: calls it cuts short (the router passes the cap as their timeout) still count as the server\'s own, and three end a hung process', async () => {
    const u = await started({ id: 'capped-hang', command: process.execPath, args: [join(ROOT, 'test/fixtures/faults/stdio-faults.mjs')], era: '2025-11-25', timeoutMs: 5000, maxTotalTimeoutMs: 300, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 0 });
    // As router/call-policy.ts sends them: timeoutMs min(timeoutMs, maxTotalTimeoutMs), no caller's limit.
    const late = await Promise.allSettled([1, 2, 3].map(() => u.request('tools/call', { name: 'hang' }, { timeoutMs: 300, maxTotalTimeoutMs: 300 })));
    for (const l of late) expect(l.status).toBe('rejected');
    // Before, each was taken for a caller's shorter limit (300 < 5000): never counted, the hung process kept for good.
    expect(u.lastError).toMatch(/^3 calls in a row got no answer within their timeout \(300 ms\)/);
  });

  it("tasks outlasting their tasks/result wait are long tasks, not calls left unanswered: the process running them is not ended", async () => {
    const u = await started(quirkSpec('legacy-task', { era: '2025-11-25', healthCheckMs: 0 }));
    u.retime({ timeoutMs: 300 }); // once started: a loaded machine may take longer to answer its initialize
    const created = await Promise.all([1, 2, 3].map(() => u.request('tools/call', { name: 'job', task: {}, arguments: { ms: 1500 } })));
    const ids = created.map((c) => (c.task as { taskId: string }).taskId);
    // tasks/result waits until the task ends, by the spec: these three out of time together.
    const waits = await Promise.allSettled(ids.map((taskId) => u.request('tasks/result', { taskId })));
    for (const w of waits) expect(w.status === 'rejected' && String(w.reason)).toMatch(/did not answer within 300 ms/);
    // Before, the three ended the process, and the tasks in it, as one that answers no calls.
    expect(u.restarts).toBe(0);
    expect(u.state).toBe('ready');
    expect(u.lastError).toBeUndefined();
  });

  it('a health check turned off by a reload (healthCheckMs 0) ends no process, not even the check then in flight', async () => {
    const spec: UpstreamSpec = { id: 'deaf', command: process.execPath, args: [join(ROOT, 'test/fixtures/faults/stdio-faults.mjs')], era: '2025-11-25', timeoutMs: 600, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 100 };
    const u = await started({ ...spec });
    expect(text(await u.request('tools/call', { name: 'deaf' }))).toBe('deaf from now on');
    // Silent 100 ms: its ping is on its way (unanswered: the process reads nothing now).
    await new Promise((r) => setTimeout(r, 300));
    u.retime({ timeoutMs: spec.timeoutMs, healthCheckMs: 0 });
    // The ping left unanswered for 600 ms ended the process, though the operator had turned checks off.
    await new Promise((r) => setTimeout(r, 900));
    expect(u.restarts).toBe(0);
    expect(u.state).toBe('ready');
  });

  it('the hard limit paused while the client answers resumes with what it had left, though the wall clock stepped before', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const r = u.request('tools/call', { name: 'elicit' }, {
        timeoutMs: 2_000,
        maxTotalTimeoutMs: 2_000,
        onServerRequest: async () => ({ action: 'accept', content: { name: 'Ada' } }),
      });
      step = 3_600_000; // while the upstream works: a laptop resumed from sleep, NTP
      // Counted on the wall clock, the limit was used up by the time the client was asked: the
      // call timed out the moment the answer resumed it.
      expect(JSON.parse(text(await r))).toEqual({ action: 'accept', content: { name: 'Ada' } });
    } finally {
      wall.mockRestore();
    }
  });

  it('the hard limit counts the time before a pause though its timer was not armed yet: it ends the call, not the idle timeout', async () => {
    // The hard cap (1600 ms) is no shorter than the idle timeout (1500 ms), so its timer waits
    // until the idle one is put off (rpc-base's armHard). The server works 1000 ms, asks the
    // client, and once answered never answers the call: 600 ms of the cap are left then, against
    // a fresh 1500 ms idle timeout. Without the pause keeping what was left, the idle timeout ends it.
    const src = `const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
let call = null;
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined || (m.id === 'q1' && m.method === undefined)) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'ask-late', version: '1' } } });
  if (m.method !== 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: {} });
  call = m.id;
  setTimeout(() => send({ jsonrpc: '2.0', id: 'q1', method: 'elicitation/create', params: { mode: 'form', message: 'x?', requestedSchema: { type: 'object', properties: {} } } }), 1000);
});`;
    const u = await started({ id: 'ask-late', command: process.execPath, args: ['-e', src], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 0 });
    let asked = 0;
    const r = await u
      .request('tools/call', { name: 'ask' }, {
        timeoutMs: 1_500,
        maxTotalTimeoutMs: 1_600,
        onServerRequest: () => (asked++, new Promise((res) => setTimeout(() => res({ action: 'accept', content: {} }), 100))),
      })
      .catch((e: unknown) => e);
    expect(asked).toBe(1);
    expect(String(r)).toMatch(/did not finish within its limit of 1600 ms/);
  });

  it('answers -32601 when no call can answer, and an RpcError from the handler travels back', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const none = await u.request('tools/call', { name: 'elicit' });
    expect(JSON.parse(text(none))).toEqual({ code: -32601, message: 'client does not support elicitation/create' });
    const refused = await u.request('tools/call', { name: 'elicit' }, { onServerRequest: () => Promise.reject(new RpcError(-1, 'user rejected')) });
    expect(JSON.parse(text(refused))).toEqual({ code: -1, message: 'user rejected' });
    const broken = await u.request('tools/call', { name: 'elicit' }, { onServerRequest: () => Promise.reject(new Error('secret detail')) });
    expect(JSON.parse(text(broken))).toEqual({ code: -32603, message: 'the client could not answer' });
  });

  it('answers a request that comes while no call is in flight -32603 saying so, not -32601 as if the client lacked the method', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const asked: unknown[] = [];
    await u.request('tools/call', { name: 'asklater', arguments: { ms: 50 } }, { onServerRequest: async (req) => (asked.push(req), { action: 'decline' }) });
    await new Promise((r) => setTimeout(r, 300));
    const late = await u.request('tools/call', { name: 'lastlate' });
    expect(JSON.parse(text(late))).toEqual({ code: -32603, message: "no call of the hub's is in flight to ask elicitation/create for" });
    expect(asked).toEqual([]);
    // Nor while only the hub's own request runs (a list fetch for its catalog; here a slow one
    // marked so): it was counted as the call alone in flight, which no client could answer for,
    // and the server was told -32601, as if the client lacked the method (a server may remember that).
    await u.request('tools/call', { name: 'asklater', arguments: { ms: 100 } }, { onServerRequest: async (req) => (asked.push(req), { action: 'decline' }) });
    await u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 400 } }, { hubOwn: true });
    const during = await u.request('tools/call', { name: 'lastlate' });
    expect(JSON.parse(text(during))).toEqual({ code: -32603, message: "no call of the hub's is in flight to ask elicitation/create for" });
    expect(asked).toEqual([]);
  });

  it('refuses a request it cannot attribute when several calls could answer', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const handler = async (): Promise<Record<string, unknown>> => ({ action: 'decline' });
    const slow = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 300 } }, { onServerRequest: handler });
    const r = await u.request('tools/call', { name: 'elicit' }, { onServerRequest: handler });
    expect(JSON.parse(text(r))).toEqual({ code: -32603, message: 'ambiguous: several calls in flight' });
    await slow;
  });

  it('answers ping itself', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const r = await u.request('tools/call', { name: 'ping' });
    expect(JSON.parse(text(r))).toMatchObject({ jsonrpc: '2.0', result: {} });
  });
});

describe('notifications/message', () => {
  it('legacy: goes to the call alone in flight, else becomes an event', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const logs: unknown[] = [];
    await u.request('tools/call', { name: 'log', arguments: { text: 'mine' } }, { onLog: (p) => logs.push(p) });
    expect(logs).toEqual([{ level: 'info', logger: 'quirk', data: 'mine' }]);
    const events: { method: string }[] = [];
    u.on('notification', (n: { method: string }) => events.push(n));
    const other = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 200 } });
    await u.request('tools/call', { name: 'log', arguments: { text: 'shared' } }, { onLog: (p) => logs.push(p) });
    await other;
    expect(logs).toHaveLength(1);
    expect(events).toEqual([{ method: 'notifications/message', params: { level: 'info', logger: 'quirk', data: 'shared' } }]);
    // The hub's own request beside it (a list fetch; here a slow one marked so) is no call the line could be about.
    const own = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 200 } }, { hubOwn: true });
    await u.request('tools/call', { name: 'log', arguments: { text: 'beside the hub' } }, { onLog: (p) => logs.push(p) });
    await own;
    expect(logs).toEqual([{ level: 'info', logger: 'quirk', data: 'mine' }, { level: 'info', logger: 'quirk', data: 'beside the hub' }]);
  });

  it('legacy: after a crash, a lone call of the first principal to call the new process gets its lines again, until a second principal calls', async () => {
    const u = await started(quirkSpec('legacy-32601'));
    const logs: string[] = [];
    const log = (principal: string, text: string) =>
      u.request('tools/call', { name: 'log', arguments: { text } }, { principal, onLog: (p) => logs.push(`${principal}: ${String(p.data)}`) });
    await log('alice', 'one');
    // Two principals served: a line may be about either's work, so a lone call gets none.
    await log('bob', 'two');
    await log('alice', 'three');
    process.kill((u as unknown as { pid: number }).pid, 'SIGKILL');
    await waitFor(() => u.state === 'ready' && u.restarts === 1, 5000, 'back after the crash');
    // Bob's work ended with the old process.
    await log('alice', 'four');
    await log('bob', 'five');
    await log('alice', 'six');
    expect(logs).toEqual(['alice: one', 'alice: four']);
  });

  it("legacy: goes to the call alone in flight while the hub's own health check waits too", async () => {
    // Busy with the call (silent 400 ms), it takes the health check's ping after it: its log line
    // comes while the ping waits, and the call is still the only call in flight.
    const src = `const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
let busy = false;
const held = [];
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {}, logging: {} }, serverInfo: { name: 'in-line', version: '1' } } });
  if (m.method !== 'tools/call') return busy ? held.push(m.id) : send({ jsonrpc: '2.0', id: m.id, result: {} });
  busy = true;
  setTimeout(() => {
    send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'mine' } });
    send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'done' }] } });
    busy = false;
    for (const id of held.splice(0)) send({ jsonrpc: '2.0', id, result: {} });
  }, 400);
});`;
    const u = await started({ id: 'in-line', command: process.execPath, args: ['-e', src], era: '2025-11-25', timeoutMs: 3000, probeTimeoutMs: 1000, maxFrameBytes: 1 << 20, healthCheckMs: 100 });
    const logs: unknown[] = [];
    const events: unknown[] = [];
    u.on('notification', (n: unknown) => events.push(n));
    expect(text(await u.request('tools/call', { name: 'work' }, { onLog: (p) => logs.push(p) }))).toBe('done');
    // With the ping waiting, two requests were in flight: the line was no call's.
    expect(logs).toEqual([{ level: 'info', data: 'mine' }]);
    expect(events).toEqual([]);
  });

  it('modern: goes to the only call that set a log level', async () => {
    const u = await started(quirkSpec('modern'));
    const logs: unknown[] = [];
    const other = u.request('tools/call', { name: 'slow', arguments: { steps: 0, ms: 200 } });
    await u.request('tools/call', { name: 'log', arguments: { text: 'mine' } }, { logLevel: 'info', onLog: (p) => logs.push(p) });
    await other;
    expect(logs).toEqual([{ level: 'info', logger: 'quirk', data: 'mine' }]);
  });

  it("has credentials in its data redacted before a call's client sees it, as an upstream error's are", async () => {
    const u = await started(quirkSpec('modern'));
    const logs: unknown[] = [];
    const token = 'ghp_' + 'a1B2c3D4e5'.repeat(4).slice(0, 36);
    await u.request('tools/call', { name: 'log', arguments: { text: `retrying with ${token}` } }, { logLevel: 'info', onLog: (p) => logs.push(p) });
    expect(logs).toEqual([{ level: 'info', logger: 'quirk', data: 'retrying with [redacted:github-token]' }]);
  });
});

describe('framing faults', () => {
  it('skips junk lines and oversized frames and keeps every call working', async () => {
    const { log, records } = captureLogger();
    const u = await started(quirkSpec('garbage', { maxFrameBytes: 65536 }), log);
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => u.request('tools/call', { name: 'echo', arguments: { i, pad: 'é'.repeat(200) } })));
    results.forEach((r, i) => expect(r.structuredContent).toMatchObject({ args: { i } }));
    const msgs = records.map((r) => r.msg);
    expect(msgs).toContain('skipped a stdout line that is not JSON-RPC');
    expect(msgs).toContain('dropped an oversized stdout frame');
    const junk = records.find((r) => r.msg === 'skipped a stdout line that is not JSON-RPC' && r.line === '[1,2,3]');
    expect(junk).toMatchObject({ level: 40, server: 'garbage' });
  });

  it('drops a response larger than maxFrameBytes; the call it answers fails at once, and is not sent again', async () => {
    const spec = quirkSpec('modern', { maxFrameBytes: 4096 });
    const u = await started(spec);
    const t0 = Date.now();
    // Idempotent, so a failure that may be retried would be: this one would get the same answer again.
    const retry = { maxAttempts: 3, budgetMs: 5000, idempotent: true };
    await expect(u.request('tools/call', { name: 'echo', arguments: { big: 'x'.repeat(8000) } }, { timeoutMs: 5000, retry })).rejects.toMatchObject({
      name: 'TransportError',
      message: expect.stringMatching(/over the limit of 4096/),
    });
    expect(Date.now() - t0).toBeLessThan(3000); // not its timeout (5 s), which would fail it otherwise
    expect(quirkLog(spec.logFile).filter((e) => e.in?.method === 'tools/call')).toHaveLength(1);
    expect(await u.request('tools/call', { name: 'echo', arguments: { small: 1 } })).toMatchObject({ structuredContent: { args: { small: 1 } } });
  });

  it('logs the child stderr with the server id', async () => {
    const { log, records } = captureLogger();
    await started(quirkSpec('legacy-exit-on-discover'), log);
    expect(records).toContainEqual(expect.objectContaining({ server: 'legacy_exit_on_discover', stderr: 'refusing server/discover before initialize' }));
  });
});

describe('a server that takes calls but answers none (calls left unanswered)', () => {
  // The fault fixture's `hang` is never answered, its pings and handshake are. The server's own
  // limit on a call is maxTotalTimeoutMs (200 ms) here: its handshake keeps timeoutMs (5 s), which
  // a loaded machine may need to start node.
  const hung = (extra: Partial<UpstreamSpec> = {}): UpstreamSpec => ({
    id: 'hung',
    command: process.execPath,
    args: [join(ROOT, 'test/fixtures/faults/stdio-faults.mjs')],
    era: '2025-11-25',
    timeoutMs: 5000,
    maxTotalTimeoutMs: 200,
    probeTimeoutMs: 1000,
    maxFrameBytes: 1 << 20,
    healthCheckMs: 0,
    ...extra,
  });
  // As router/call-policy.ts sends them: timeoutMs min(timeoutMs, maxTotalTimeoutMs).
  const hang = (u: Upstream, n = 1, ms = 200) => Promise.allSettled(Array.from({ length: n }, () => u.request('tools/call', { name: 'hang' }, { timeoutMs: ms, maxTotalTimeoutMs: ms })));

  it('restarted again and again for it, it is never `failed` as a crash loop, and waits longer before each restart', async () => {
    const u = await started(hung(), silentLogger, { backoff: { baseMs: 100, crashLimit: 3, windowMs: 60_000, failedRetryMs: 600_000, jitter: 0 } });
    const states: [UpstreamState, number][] = [];
    u.on('state', (s: UpstreamState) => states.push([s, Date.now()]));
    await hang(u, 3);
    for (let i = 1; i <= 2; i++) {
      await waitFor(() => u.state === 'ready' && u.restarts === i, 5000, `back after restart ${i}`);
      // On probation: one more call left unanswered takes it down again.
      await hang(u);
      expect(u.state, u.lastError).not.toBe('ready');
    }
    // Before, each restart for calls left unanswered counted toward the crash-loop limit: the third
    // within 60 s had it `failed`, retried once a minute (here: 10), as if it crashed at start.
    expect(u.state).toBe('restarting');
    expect(u.lastError).toMatch(/^a call got no answer within its timeout \(200 ms\) again, before any was answered since the server was back: it still takes calls without answering them; the process was ended$/);
    await waitFor(() => u.state === 'ready' && u.restarts === 3, 5000, 'back after restart 3');
    expect(states.map(([s]) => s)).toEqual(['restarting', 'ready', 'restarting', 'ready', 'restarting', 'ready']);
    // Each wait twice the one before (100, 200, 400 ms), the start of node on top.
    const waits = [0, 2, 4].map((i) => states[i + 1][1] - states[i][1]);
    expect(waits[2], String(waits)).toBeGreaterThanOrEqual(400);
    expect(waits[1], String(waits)).toBeGreaterThanOrEqual(200);
    // A call answered: the server works its calls, and the next restart waits the first delay
    // (100 ms) again, not the fourth (800 ms): its new process is there well before.
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { a: 1 } }))).toBe('{"a":1}');
    await hang(u, 3);
    expect(u.state).toBe('restarting');
    const down = Date.now();
    await waitFor(() => (u as unknown as { pid?: number }).pid !== undefined, 5000, 'a new process');
    expect(Date.now() - down).toBeLessThan(500);
  });

  it("the hub's own lists are no calls: lists left unanswered do not take down a server whose calls are answered", async () => {
    // Answers its handshake, pings and tools/list; never its resources/list (a broken handler), nor a call of `hang`.
    const src = `const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {}, resources: {} }, serverInfo: { name: 'no-resources', version: '1' } } });
  if (m.method === 'resources/list') return;
  if (m.method === 'tools/call' && m.params.name === 'hang') return;
  send({ jsonrpc: '2.0', id: m.id, result: m.method === 'tools/list' ? { tools: [] } : {} });
});`;
    const u = await started({ ...hung({ maxTotalTimeoutMs: undefined }), id: 'no-resources', args: ['-e', src] });
    // Shortened once started (the handshake keeps 5 s). As the catalog fetches them: no options.
    u.retime({ timeoutMs: 150 });
    const list = () => u.request('resources/list', {}).catch((e: unknown) => e);
    for (let i = 0; i < 3; i++) expect(await list()).toMatchObject({ name: 'TimeoutError' });
    // Before, three of the hub's list fetches made "3 calls in a row got no answer" and ended the process.
    expect([u.state, u.restarts]).toEqual(['ready', 0]);
    // Nor do they join calls left unanswered: two calls and a list are not three calls.
    await hang(u, 2, 150);
    expect(await list()).toMatchObject({ name: 'TimeoutError' });
    expect([u.state, u.restarts]).toEqual(['ready', 0]);
    await hang(u, 1, 150);
    await waitFor(() => u.restarts === 1, 5000, 'three calls in a row');
    expect(u.lastError).toMatch(/^3 calls in a row got no answer/);
  });

  it('calls left unanswered far apart are no hang: the count starts over once ten of its call limits passed without one', async () => {
    const u = await started(hung({ maxTotalTimeoutMs: 100 }));
    await hang(u, 2, 100);
    await new Promise((r) => setTimeout(r, 10 * 100 + 100));
    await hang(u, 1, 100);
    // Before, the third timeout took it down however long after the first two it came (a day later too).
    expect([u.state, u.restarts]).toEqual(['ready', 0]);
    await hang(u, 2, 100);
    await waitFor(() => u.restarts === 1, 5000, 'three in a row');
    expect(u.lastError).toMatch(/^3 calls in a row got no answer/);
  });

  it('a crash after restarts for calls left unanswered is the first of a crash loop, not its last', async () => {
    const u = await started(hung(), silentLogger, { backoff: { baseMs: 20, crashLimit: 2, windowMs: 60_000, failedRetryMs: 600_000, jitter: 0 } });
    await hang(u, 3);
    await waitFor(() => u.state === 'ready' && u.restarts === 1, 5000, 'back');
    await hang(u);
    await waitFor(() => u.state === 'ready' && u.restarts === 2, 5000, 'back again');
    process.kill((u as unknown as { pid: number }).pid, 'SIGKILL');
    await waitFor(() => u.state !== 'ready', 5000, 'down');
    expect(u.state).toBe('restarting');
    // Two restarts after hangs, then one after the crash (switchyard_upstream_restarts_total's reason).
    await waitFor(() => u.state === 'ready' && u.restarts === 3, 5000, 'back after the crash');
    expect(u.hungRestarts).toBe(2);
  });


  it('probation ends once the server has been back ten of its timeouts without a call left unanswered: one timeout then is one timeout', async () => {
    const u = await started(hung({ maxTotalTimeoutMs: 100 }));
    await hang(u, 3, 100);
    await waitFor(() => u.state === 'ready' && u.restarts === 1, 5000, 'back');
    const back = Date.now();
    // Nothing but the hub's own lists and pings meanwhile: no call answered, none left unanswered.
    await new Promise((r) => setTimeout(r, 10 * 100 + 100 - (Date.now() - back)));
    await hang(u, 1, 100);
    // Before, it stayed on probation for good: one timeout, hours later, ended the process.
    expect(u.state).toBe('ready');
    expect(u.restarts).toBe(1);
    await hang(u, 2, 100);
    await waitFor(() => u.restarts === 2, 5000, 'three in a row');
    expect(u.lastError).toMatch(/^3 calls in a row got no answer/);
  });

  it("ended for it, it is not shown with the stderr of an earlier process that crashed: the hub ended this one, and no line of that one says why", async () => {
    const src = `const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'in-line', version: '1' } } });
  if (m.method !== 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: {} });
  if (m.params.name === 'crash') console.error('Error: out of disk'), process.exit(1);
});`;
    const u = await started({ ...hung(), id: 'in-line', args: ['-e', src] });
    await u.request('tools/call', { name: 'crash' }).catch(() => undefined);
    await waitFor(() => u.state === 'ready' && u.restarts === 1, 5000, 'back after the crash');
    expect(u.lastStderr).toBe('Error: out of disk');
    await hang(u, 3);
    await waitFor(() => u.restarts === 2, 5000, 'restarted for calls left unanswered');
    expect(u.lastError).toMatch(/^3 calls in a row got no answer/);
    // Before, /admin/servers (and so `switchyard servers`, doctor) said "3 calls in a row … (stderr: Error: out of disk)".
    expect(u.lastStderr).toBeUndefined();
  });

  it('one that answers nothing at all and is not called: found by the health check alone (healthCheckMs of silence, then timeoutMs), ended and restarted as hung, no crash', async () => {
    const u = await started(hung({ maxTotalTimeoutMs: undefined }), silentLogger, { backoff: { baseMs: 400, crashLimit: 2, windowMs: 60_000, failedRetryMs: 600_000, jitter: 0 } });
    let downAt = 0;
    u.on('state', (s: UpstreamState) => s === 'restarting' && (downAt = Date.now()));
    for (let i = 1; i <= 2; i++) {
      // Shortened once started: a loaded machine may take longer to answer its initialize. Its new
      // process gets that time again (the limit of its handshake is timeoutMs), checks off.
      u.retime({ timeoutMs: 400, healthCheckMs: 100 });
      u.once('state', () => u.retime({ timeoutMs: 5000, healthCheckMs: 0 }));
      expect(text(await u.request('tools/call', { name: 'deaf' }))).toBe('deaf from now on');
      const t0 = Date.now();
      await waitFor(() => u.restarts === i, 5000, `found hung, ${i}`);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(400);
      // Its `deaf` call answered since the first: served well, the second waits the first delay
      // (400 ms) again, not twice that.
      expect(Date.now() - downAt).toBeLessThan(700);
      expect(u.lastError).toMatch(/^process stopped answering \(silent for \d+ s, a ping unanswered for 400 ms\), and was ended$/);
      // Before, each was a crash toward the limit (2 here): the second had it `failed`.
      expect(u.state).toBe('restarting');
      await waitFor(() => u.state === 'ready', 5000, 'back');
    }
    // Not on probation (the check may fire on a machine too loaded for a well server to answer
    // in time): a call left unanswered now is one of three.
    u.retime({ timeoutMs: 300, healthCheckMs: 0 });
    await hang(u, 1, 300);
    expect([u.state, u.restarts]).toEqual(['ready', 2]);
    expect(text(await u.request('tools/call', { name: 'echo', arguments: { b: 1 } }))).toBe('{"b":1}');
  });

  it('a hub held up past the wait for a ping (a long pause, a loaded machine) reads the answer that came meanwhile before it judges the process: not ended as hung', async () => {
    const dir = tmpDir();
    const [pinged, go, answered, pings] = ['pinged', 'go', 'answered', 'pings'].map((f) => join(dir, f));
    // Its first ping is answered once the test says go (the test's event loop then held), the rest at once.
    const src = `const { appendFileSync, existsSync, writeFileSync } = require('node:fs');
const send = (m, then) => process.stdout.write(JSON.stringify(m) + '\\n', then);
let first = true;
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'late-ping', version: '1' } } });
  if (m.method !== 'ping') return send({ jsonrpc: '2.0', id: m.id, result: m.method === 'tools/list' ? { tools: [] } : {} });
  appendFileSync(${JSON.stringify(pings)}, process.pid + '\\n');
  if (!first) return send({ jsonrpc: '2.0', id: m.id, result: {} });
  first = false;
  writeFileSync(${JSON.stringify(pinged)}, '');
  const t = setInterval(() => existsSync(${JSON.stringify(go)}) && (clearInterval(t), send({ jsonrpc: '2.0', id: m.id, result: {} }, () => writeFileSync(${JSON.stringify(answered)}, ''))), 5);
});`;
    const u = await started({ ...hung({ maxTotalTimeoutMs: undefined }), id: 'late-ping', args: ['-e', src] });
    const pid = (u as unknown as { pid: number }).pid;
    u.retime({ timeoutMs: 300, healthCheckMs: 100 });
    await waitFor(() => existsSync(pinged), 10_000, 'the first ping');
    // The hub's event loop held (as by a long GC, or a machine too loaded to run it) until the
    // answer is in the pipe and the ping's 300 ms are over: its timer is due before that read.
    holdLoop(go, answered);
    // Before, the ping's timer, run before the pipe was read, had the process ended as hung.
    const pingsOf = () => readFileSync(pings, 'utf8').split('\n').filter((l) => l === String(pid)).length;
    await waitFor(() => u.restarts > 0 || pingsOf() >= 2, 10_000, 'the next ping, or an end');
    expect([u.state, u.restarts, u.lastError]).toEqual(['ready', 0, undefined]);
  });

  // A call's own timeouts, as the health check's ping: the hub held up in a callback (here one
  // run after the poll, as a long one of any kind would be) runs its due timers before it next
  // reads the pipe, where an answer or progress that came in time waits.
  it.each([
    ['an answer', 'answer'],
    ['progress, and then its answer,', 'progress'],
  ])('a call that got %s in time while the hub was held up past its timeout is not failed as unanswered', async (_what, kind) => {
    const dir = tmpDir();
    const [called, go, sent] = ['called', 'go', 'sent'].map((f) => join(dir, f));
    const src = `const { existsSync, writeFileSync } = require('node:fs');
const send = (m, then) => process.stdout.write(JSON.stringify(m) + '\\n', then);
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'held', version: '1' } } });
  if (m.method !== 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: m.method === 'tools/list' ? { tools: [] } : {} });
  writeFileSync(${JSON.stringify(called)}, '');
  const answer = (then) => send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'ok' }] } }, then);
  const t = setInterval(() => {
    if (!existsSync(${JSON.stringify(go)})) return;
    clearInterval(t);
    if (${JSON.stringify(kind)} === 'answer') return answer(() => writeFileSync(${JSON.stringify(sent)}, ''));
    send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: m.params._meta.progressToken, progress: 1 } }, () => writeFileSync(${JSON.stringify(sent)}, ''));
    setTimeout(answer, 100);
  }, 5);
});`;
    const u = createUpstream({ id: 'held', command: process.execPath, args: ['-e', src], era: '2025-11-25', timeoutMs: 5000, probeTimeoutMs: 2000, maxFrameBytes: 1 << 20 }, silentLogger, {});
    open.push(u);
    await u.start();
    const r = u.request('tools/call', { name: 'a' }, { timeoutMs: 300, onProgress: () => undefined }).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    await waitFor(() => existsSync(called), 10_000, 'the call');
    await holdLoopAfterPoll(go, sent);
    expect(existsSync(sent)).toBe(true);
    // Before, 'server "held" did not answer within 300 ms (nor report progress)'.
    expect(await r).toBe('answered');
  });
});

describe('supervision', () => {
  it('fails the calls in flight when the process crashes, then restarts it', async () => {
    const once = join(tmpDir(), 'crashed');
    const spec = quirkSpec('crash-mid-call', { env: { QUIRK_CRASH_ONCE: once } });
    const u = await started(spec);
    const states: UpstreamState[] = [];
    u.on('state', (s: UpstreamState) => states.push(s));
    const progress: ProgressInfo[] = [];
    const err = await u.request('tools/call', { name: 'x' }, { onProgress: (p) => progress.push(p) }).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: 'TransportError', notDelivered: false });
    expect((err as Error).message).toMatch(/exited with code 1/);
    expect(progress).toEqual([{ progress: 1 }]);
    expect(u.state).toBe('restarting');
    expect(u.lastError).toMatch(/exited with code 1/);
    await expect(u.request('tools/list', {})).rejects.toMatchObject({ name: 'UpstreamUnavailableError', state: 'restarting' });
    await waitFor(() => u.state === 'ready', 5000, 'restart');
    expect(states).toEqual(['restarting', 'ready']);
    expect(u.restarts).toBe(1);
    expect(text(await u.request('tools/call', { name: 'x' }))).toBe('survived');
    expect(perProcess(spec.logFile)).toHaveLength(2);
  });

  it('a crash older than the crash-loop window does not count, though the wall clock stepped back since', async () => {
    const once = join(tmpDir(), 'crashed');
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const u = await started(quirkSpec('crash-mid-call', { env: { QUIRK_CRASH_ONCE: once } }), silentLogger, { backoff: { baseMs: 10, crashLimit: 2, windowMs: 300 } });
      await u.request('tools/call', { name: 'x' }).catch(() => undefined);
      await waitFor(() => u.state === 'ready', 5000, 'restart');
      step = -3_600_000;
      await new Promise((r) => setTimeout(r, 350));
      rmSync(once);
      await u.request('tools/call', { name: 'x' }).catch(() => undefined);
      // On the wall clock the first crash was an hour ahead, inside the window: a crash loop, failed.
      expect(u.state).toBe('restarting');
      await waitFor(() => u.state === 'ready', 5000, 'second restart');
    } finally {
      wall.mockRestore();
    }
  });

  it('lastError keeps why it went down while attempts to reconnect fail, and says it alone once back', async () => {
    const dir = tmpDir();
    const broken = join(dir, 'broken');
    const script = join(dir, 'wrapper.mjs');
    // Crashes at every call; started while \`broken\` exists, exits at once.
    writeFileSync(script, `import { existsSync } from 'node:fs';\nif (existsSync(${JSON.stringify(broken)})) process.exit(3);\nawait import(${JSON.stringify(join(ROOT, 'test/fixtures/quirks/crash-mid-call.mjs'))});\n`);
    const u = await started({ ...quirkSpec('crash-mid-call'), args: [script] }, silentLogger, { backoff: { baseMs: 20, crashLimit: 1000 } });
    writeFileSync(broken, '');
    await u.request('tools/call', { name: 'x' }).catch(() => undefined);
    await waitFor(() => u.restarts >= 1 && /code 3/.test(u.lastError ?? ''), 5000, 'a failed attempt');
    expect(u.lastError).toBe('process exited with code 1; the last attempt to reconnect failed: process exited with code 3');
    await expect(u.request('tools/list', {})).rejects.toThrow(/exited with code 1; the last attempt to reconnect failed/);
    rmSync(broken);
    await waitFor(() => u.state === 'ready', 5000, 'back');
    expect(u.lastError).toBe('process exited with code 1');
  });

  it('since is when it entered its state, not the last of its failed attempts there', async () => {
    const script = join(tmpDir(), 'dies.mjs');
    writeFileSync(script, 'process.exit(3)\n');
    const u = createUpstream({ id: 'dies', command: process.execPath, args: [script], era: 'auto', timeoutMs: 2000, probeTimeoutMs: 500, maxFrameBytes: 65536 }, silentLogger, {
      backoff: { baseMs: 30, crashLimit: 1000 },
    });
    open.push(u);
    await u.start().catch(() => undefined);
    const since = u.since;
    await new Promise((r) => u.once('state', r)); // the next attempt failed too
    expect(u.state).toBe('starting');
    expect(u.since).toBe(since);
  });

  it('marks a crash loop failed and keeps retrying slowly; start() rejects with the cause', async () => {
    const dir = tmpDir();
    const script = join(dir, 'dies.mjs');
    writeFileSync(script, 'process.exit(3)\n');
    const u = createUpstream(
      { id: 'dies', command: process.execPath, args: [script], era: 'auto', timeoutMs: 2000, probeTimeoutMs: 500, maxFrameBytes: 65536 },
      silentLogger,
      { backoff: { baseMs: 10, crashLimit: 3, windowMs: 60_000, failedRetryMs: 600_000 } },
    );
    open.push(u);
    const states: [UpstreamState, string | undefined][] = [];
    u.on('state', (s: UpstreamState, d?: string) => states.push([s, d]));
    await expect(u.start()).rejects.toMatchObject({ name: 'TransportError', message: 'process exited with code 3' });
    await waitFor(() => u.state === 'failed', 5000, 'failed');
    expect(u.restarts).toBe(2);
    // Three failures (the first start and two retries) reach the limit.
    expect(states.map(([s]) => s)).toEqual(['starting', 'starting', 'failed']);
    expect(states[2][1]).toBe('process exited with code 3');
    await expect(u.start()).rejects.toMatchObject({ name: 'UpstreamUnavailableError' });
  });

  it('reports a command that cannot be spawned', async () => {
    const u = createUpstream(
      { id: 'missing', command: join(tmpDir(), 'no-such-binary'), era: 'auto', timeoutMs: 1000, probeTimeoutMs: 300, maxFrameBytes: 65536 },
      silentLogger,
    );
    open.push(u);
    await expect(u.start()).rejects.toThrow(/process could not start: spawn .*ENOENT/);
    expect(u.state).toBe('starting');
  });

  it('close() ends stdin, then SIGTERMs, then SIGKILLs the whole process group', async () => {
    const spec = quirkSpec('spawns-grandchild', { env: { QUIRK_STUBBORN: '1' } });
    const u = await started(spec);
    const log = quirkLog(spec.logFile);
    const leader = log.find((e) => e.spawn)!.spawn!;
    const grandchild = log.find((e) => e.grandchild)!.grandchild!;
    expect(alive(leader) && alive(grandchild)).toBe(true);
    const t0 = Date.now();
    await u.close();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3900);
    expect(quirkLog(spec.logFile).some((e) => e.sigterm === leader)).toBe(true);
    await waitFor(() => !alive(leader) && !alive(grandchild), 2000, 'group gone');
  }, 15_000);

  it('kills every child group when the hub process exits', () => {
    const spec = quirkSpec('spawns-grandchild', { env: { QUIRK_STUBBORN: '1' } });
    const hub = `
      import { createUpstream } from ${JSON.stringify(join(ROOT, 'dist/src/upstream/index.js'))};
      import { silentLogger } from ${JSON.stringify(join(ROOT, 'dist/src/log.js'))};
      const u = createUpstream(${JSON.stringify(spec)}, silentLogger);
      await u.start();
      process.exit(0);
    `;
    execFileSync(process.execPath, ['--input-type=module', '-e', hub], { timeout: 10_000 });
    const log = quirkLog(spec.logFile);
    const leader = log.find((e) => e.spawn)!.spawn!;
    const grandchild = log.find((e) => e.grandchild)!.grandchild!;
    return waitFor(() => !alive(leader) && !alive(grandchild), 2000, 'children gone');
  });
});

/** A legacy server that takes its calls one at a time: each call asks the client (`q1`), and it answers nothing else, a ping included, until the client answered. */
const IN_LINE_SERVER = `const send = (m) => process.stdout.write(JSON.stringify(m) + '\\n');
let waiting = null;
require('node:readline').createInterface({ input: process.stdin }).on('line', (l) => {
  const m = JSON.parse(l);
  if (waiting !== null) {
    if (m.id === 'q1' && m.method === undefined) send({ jsonrpc: '2.0', id: waiting, result: { content: [{ type: 'text', text: 'answered' }] } }), (waiting = null);
    return;
  }
  if (m.id === undefined) return;
  if (m.method === 'initialize') return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'in-line', version: '1' } } });
  if (m.method !== 'tools/call') return send({ jsonrpc: '2.0', id: m.id, result: {} });
  waiting = m.id;
  send({ jsonrpc: '2.0', id: 'q1', method: 'elicitation/create', params: { mode: 'form', message: 'x?', requestedSchema: { type: 'object', properties: {} } } });
});`;
