/**
 * Era detection over stdio against real processes: raw quirk fixtures reproducing what deployed
 * servers do with a `server/discover` probe, the npm memory server (SDK 1.x, legacy) and an
 * SDK v2 server that refuses the legacy era.
 */
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { LEGACY, MODERN } from '../../src/protocol/era.js';
import { createUpstream } from '../../src/upstream/index.js';
import type { Upstream, UpstreamSpec } from '../../src/upstream/types.js';
import { captureLogger, perProcess, QUIRKS, quirkSpec, ROOT, tmpDir, waitFor } from './upstream-helpers.js';

const START_DELAY = join(ROOT, 'test/fixtures/start-delay.mjs');
const open: Upstream[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((u) => u.close()));
});

/** A real server's spec, with this file's defaults (era auto, a 5 s probe). */
function serverSpec(id: string, command: string, args: string[], extra: Partial<UpstreamSpec> = {}): UpstreamSpec {
  return { id, command, args, era: 'auto', timeoutMs: 10_000, probeTimeoutMs: 5000, maxFrameBytes: 1 << 20, ...extra };
}

function make(spec: UpstreamSpec): Upstream {
  const u = createUpstream(spec, silentLogger, { backoff: { baseMs: 50 } });
  open.push(u);
  return u;
}

describe('stdio era detection', () => {
  for (const [fixture, answer] of [
    ['legacy-32601', 'a -32601 error'],
    ['legacy-32602', 'a -32602 error'],
    ['legacy-32022', 'a -32022 error listing only legacy versions'],
  ] as const) {
    it(`takes ${answer} to server/discover as legacy and initializes the same process`, async () => {
      const spec = quirkSpec(fixture);
      const u = make(spec);
      await u.start();
      expect(u.state).toBe('ready');
      expect(u.era).toBe(LEGACY);
      expect(u.protocolVersion).toBe('2025-11-25');
      expect(u.serverInfo?.name).toMatch(/^discover-32(60|02)/);
      expect(u.capabilities).toEqual({ tools: { listChanged: true }, logging: {} });
      expect(u.instructions).toMatch(/legacy quirk/);
      // A round trip, so the fixture has logged everything sent before it.
      await u.request('tools/list', {});
      const procs = perProcess(spec.logFile);
      expect(procs).toHaveLength(1);
      expect(procs[0].map((m) => m.method)).toEqual(['server/discover', 'initialize', 'notifications/initialized', 'tools/list']);
      const init = procs[0][1].params!;
      expect(init.protocolVersion).toBe('2025-11-25');
      expect(init.clientInfo).toMatchObject({ name: 'switchyard' });
      expect(init.capabilities).toEqual({ elicitation: { form: {}, url: {} }, sampling: { tools: {} }, roots: { listChanged: true } });
      // The probe carried the full modern envelope.
      expect(procs[0][0].params!._meta).toMatchObject({
        'io.modelcontextprotocol/protocolVersion': MODERN,
        'io.modelcontextprotocol/clientCapabilities': {},
        'io.modelcontextprotocol/clientInfo': { name: 'switchyard' },
      });
    });
  }

  it('takes silence past probeTimeoutMs as legacy', async () => {
    const spec = quirkSpec('legacy-silent-discover', { probeTimeoutMs: 400 });
    const u = make(spec);
    const t0 = Date.now();
    await u.start();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(390);
    expect(u.era).toBe(LEGACY);
    await u.request('tools/list', {});
    expect(perProcess(spec.logFile)[0].map((m) => m.method)).toEqual(['server/discover', 'initialize', 'notifications/initialized', 'tools/list']);
    // The probe is never cancelled (nothing but initialize may precede initialize).
    expect(perProcess(spec.logFile)[0].some((m) => m.method === 'notifications/cancelled')).toBe(false);
    // Nor is it left open once initialize answered: as a second call in flight it would leave
    // the legacy log line below to no call (log-targets.ts).
    const logs: unknown[] = [];
    await u.request('tools/call', { name: 'log', arguments: { text: 'mine' } }, { onLog: (p) => logs.push(p) });
    expect(logs).toMatchObject([{ data: 'mine' }]);
  });

  // A process slower to start than probeTimeoutMs (a busy machine, a cold cache) reads the probe
  // late and answers it before initialize: stdio is in order, so that answer is the evidence.
  const slow = (fixture: string, ms: number) => {
    const spec = quirkSpec(fixture, { probeTimeoutMs: 300, env: { START_DELAY_MS: String(ms) } });
    return { ...spec, args: ['--import', START_DELAY, ...spec.args!] };
  };

  it('takes a late DiscoverResult (a server slow to start) as modern, and starts it again for a clean modern connection', async () => {
    const spec = slow('modern', 1200);
    const { log, records } = captureLogger();
    const u = createUpstream(spec, log, { backoff: { baseMs: 50 } });
    open.push(u);
    await u.start();
    expect(u.era).toBe(MODERN);
    expect(u.restarts).toBe(0);
    const r = await u.request('tools/call', { name: 'echo', arguments: { a: 1 } });
    expect(r.structuredContent).toMatchObject({ args: { a: 1 } });
    // The first process was sent initialize after the probe timed out (it may be killed before
    // it notes that line); the second, also slow, is a known modern server: its probe waits.
    expect(records.filter((r) => r.msg === 'era probe').map((r) => r.verdict)).toEqual(['legacy', 'modern']);
    expect(records.some((r) => String(r.msg).startsWith('server/discover answered after the probe timeout'))).toBe(true);
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(2);
    expect(procs[0][0].method).toBe('server/discover');
    expect(procs[1].map((m) => m.method)).toEqual(['server/discover', 'tools/call']);
  });

  it('keeps the legacy verdict when the late answer to server/discover is an error, and drops the probe without cancelling it', async () => {
    const spec = slow('legacy-32601', 900);
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(LEGACY);
    await u.request('tools/list', {});
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(1);
    expect(procs[0].map((m) => m.method)).toEqual(['server/discover', 'initialize', 'notifications/initialized', 'tools/list']);
    expect(perProcess(spec.logFile)[0].some((m) => m.method === 'notifications/cancelled')).toBe(false);
  });

  it('respawns a server slow to start that exits on the late probe, and initializes the new process', async () => {
    const spec = slow('legacy-exit-on-discover', 700);
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(LEGACY);
    const r = await u.request('tools/call', { name: 'echo', arguments: { a: 2 } });
    expect(r.structuredContent).toMatchObject({ args: { a: 2 } });
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(2);
    expect(procs[0][0].method).toBe('server/discover');
    expect(procs[1].map((m) => m.method)).toEqual(['initialize', 'notifications/initialized', 'tools/call']);
  });

  // A hub stopped, or a server restarted or removed by a reload, while a server makes its first
  // start: close() fails the probe in flight, which read as "the process exited on the probe"
  // and spawned a new process after the close, which nothing closed (the hub's stop had already
  // returned; the watchdog killed it when the hub exited, or it ran on under a running hub
  // until its initialize failed).
  it('spawns no new process when closed while its era probe is in flight', async () => {
    const { log, records } = captureLogger();
    const spec = quirkSpec('legacy-32601', { env: { START_DELAY_MS: '1500' } });
    const u = createUpstream({ ...spec, args: ['--import', START_DELAY, ...spec.args!] }, log, { backoff: { baseMs: 50 } });
    open.push(u);
    const started = u.start().catch((err: Error) => err);
    await waitFor(() => records.some((r) => r.msg === 'spawned'), 5_000, 'the first spawn');
    await u.close();
    expect(await started).toMatchObject({ message: expect.stringMatching(/stopped/) });
    // A respawn would follow the probe's failure at once.
    await new Promise((r) => setTimeout(r, 300));
    expect(records.filter((r) => r.msg === 'spawned'), JSON.stringify(records)).toHaveLength(1);
    expect(u.state).toBe('stopped');
    // A close is no failure to start: nothing at warn level says one.
    expect(records.filter((r) => (r.level as number) >= 40).map((r) => r.msg)).toEqual([]);
  });

  it('detects an SDK v2 server of both eras that is slow to start as modern', async () => {
    const fixture = join(ROOT, 'test/fixtures/conformance/server.mjs');
    const u = make(serverSpec('conformance', process.execPath, ['--import', START_DELAY, fixture], { env: { START_DELAY_MS: '1500' }, probeTimeoutMs: 500 }));
    await u.start();
    expect(u.era).toBe(MODERN);
    const r = await u.request('tools/call', { name: 'test_input_required_result_elicitation', arguments: {} }, { clientCapabilities: { elicitation: {} } });
    expect(r).toMatchObject({ resultType: 'input_required', inputRequests: { user_name: { method: 'elicitation/create' } } });
  });

  it('respawns a server that exits on the probe and initializes the new process', async () => {
    const spec = quirkSpec('legacy-exit-on-discover');
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(u.restarts).toBe(0);
    const r = await u.request('tools/call', { name: 'echo', arguments: { a: 1 } });
    expect(r.structuredContent).toMatchObject({ args: { a: 1 } });
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(2);
    expect(procs[0].map((m) => m.method)).toEqual(['server/discover']);
    expect(procs[1].map((m) => m.method)).toEqual(['initialize', 'notifications/initialized', 'tools/call']);
  });

  it('recognises a modern server from its DiscoverResult and never sends initialize', async () => {
    const spec = quirkSpec('modern');
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(MODERN);
    expect(u.protocolVersion).toBe(MODERN);
    expect(u.serverInfo).toEqual({ name: 'modern-quirk', version: '2.0.0' });
    expect(u.capabilities).toEqual({ tools: {}, logging: {} });
    expect(u.instructions).toBe('modern quirk modern-quirk');
    expect(perProcess(spec.logFile)[0].map((m) => m.method)).toEqual(['server/discover']);
  });

  it('treats -32022 with a supported list as modern and asks again instead of falling back', async () => {
    const spec = quirkSpec('modern', { env: { QUIRK_REJECT_FIRST: '1' } });
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(MODERN);
    expect(perProcess(spec.logFile)[0].map((m) => m.method)).toEqual(['server/discover', 'server/discover']);
  });

  it('fails clearly when a modern server speaks no version the hub speaks', async () => {
    const spec = quirkSpec('modern', { env: { QUIRK_SUPPORTED: '2027-01-01' } });
    const u = make(spec);
    await expect(u.start()).rejects.toThrow(/2027-01-01.*2026-07-28/);
    expect(u.state).toBe('starting');
    expect(u.lastError).toMatch(/2027-01-01/);
    expect(perProcess(spec.logFile).flat().some((m) => m.method === 'initialize')).toBe(false);
  });

  it('says what was wrong when a modern-only server answers server/discover with no DiscoverResult, and refuses initialize', async () => {
    const spec = quirkSpec('modern', { env: { QUIRK_BAD_DISCOVER: '1' } });
    const u = make(spec);
    // Its own word alone ("Unsupported protocol version") hid that the server is modern and its discover answer broken.
    await expect(u.start()).rejects.toThrow(
      'server/discover answered with something that is not a DiscoverResult (capabilities is not an object), and initialize was refused with -32022 naming 2026-07-28: a modern-only server whose server/discover answer must be fixed',
    );
    expect(u.lastError).toMatch(/capabilities is not an object/);
  });

  it('skips the probe when the era is configured as legacy', async () => {
    const spec = quirkSpec('legacy-exit-on-discover', { era: LEGACY });
    const u = make(spec);
    await u.start();
    expect(u.era).toBe(LEGACY);
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(1);
    expect(procs[0][0].method).toBe('initialize');
  });

  it('refuses a legacy server configured as modern', async () => {
    const u = make(quirkSpec('legacy-32601', { era: MODERN }));
    await expect(u.start()).rejects.toThrow(/configured as 2026-07-28/);
    expect(u.era).toBeUndefined();
  });

  it('keeps the verdict for a respawn: the new process gets initialize, not a probe', async () => {
    const spec = quirkSpec('legacy-32601');
    const u = make(spec);
    await u.start();
    await expect(u.request('tools/call', { name: 'crash' })).rejects.toMatchObject({ name: 'TransportError' });
    await new Promise<void>((r) => u.on('state', (s) => s === 'ready' && r()));
    await u.request('tools/list', {});
    const procs = perProcess(spec.logFile);
    expect(procs).toHaveLength(2);
    expect(procs[1].map((m) => m.method)).toEqual(['initialize', 'notifications/initialized', 'tools/list']);
    expect(u.restarts).toBe(1);
  });

  it('detects @modelcontextprotocol/server-memory (SDK 1.x) as legacy', async () => {
    const u = make(serverSpec('memory', join(ROOT, 'node_modules/.bin/mcp-server-memory'), [], { env: { MEMORY_FILE_PATH: join(tmpDir(), 'memory.jsonl') } }));
    await u.start();
    expect(u.era).toBe(LEGACY);
    expect(u.serverInfo?.name).toBe('memory-server');
    const created = await u.request('tools/call', {
      name: 'create_entities',
      arguments: { entities: [{ name: 'Ada', entityType: 'person', observations: ['wrote the first program'] }] },
    });
    expect(created.isError).toBeFalsy();
    const graph = await u.request('tools/call', { name: 'read_graph', arguments: {} });
    expect(JSON.stringify(graph)).toContain('wrote the first program');
  });

  it('detects an SDK v2 server that rejects the legacy era as modern', async () => {
    const u = make(serverSpec('sdk2', process.execPath, [join(QUIRKS, 'sdk2-modern-stdio.mjs')]));
    await u.start();
    expect(u.era).toBe(MODERN);
    expect(u.serverInfo).toEqual({ name: 'sdk2-modern', version: '2.4.0' });
    const list = await u.request('tools/list', {});
    expect((list.tools as { name: string }[]).map((t) => t.name)).toEqual(['echo']);
    const r = await u.request('tools/call', { name: 'echo', arguments: { text: 'héllo' } });
    expect(r).toMatchObject({ resultType: 'complete', content: [{ type: 'text', text: 'héllo' }] });
  });
});
