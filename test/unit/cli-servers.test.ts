/** What `switchyard servers restart` prints once the server settled, or the wait was over. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { toolFindings, upstreamFindings } from '../../src/cli/doctor.js';
import { restartOutcome, serversTable, untilSettled } from '../../src/cli/servers.js';
import type { ServerView, ToolView } from '../../src/downstream/admin-views.js';

const view = (over: Partial<ServerView>): ServerView => ({
  id: 'a',
  transport: 'stdio',
  state: 'ready',
  era: '2025-11-25',
  protocolVersion: '2025-11-25',
  serverInfo: { name: 'notes', version: '1.2.0' },
  tools: null,
  restarts: 0,
  lastError: null,
  stderr: null,
  since: 0,
  trust: 'untrusted',
  inFlight: 0,
  queued: 0,
  failMode: 'open',
  ...over,
});

describe('servers restart outcome', () => {
  afterEach(() => vi.useRealTimers());

  it('waits --timeout on a clock that a step of the wall clock (NTP, a resume) does not move', async () => {
    // Only Date is faked: the wall clock jumps an hour ahead at every poll, timers run as they do.
    vi.useFakeTimers({ toFake: ['Date'] });
    let polls = 0;
    const poll = async () => {
      vi.setSystemTime(Date.now() + 3_600_000);
      return view({ state: ++polls < 3 ? 'starting' : 'ready' });
    };
    const { s, waitedMs } = await untilSettled(poll, 30_000);
    expect([polls, s?.state]).toEqual([3, 'ready']); // not given up at the first poll, "still starting after 3600 s"
    expect(waitedMs).toBeLessThan(30_000);
    // And a step back does not stretch it: a 0.5 s wait ends after about that.
    vi.setSystemTime(Date.now() - 7_200_000);
    const t0 = performance.now();
    const back = await untilSettled(async () => (vi.setSystemTime(Date.now() - 3_600_000), view({ state: 'starting' })), 500);
    expect(back.s?.state).toBe('starting');
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('ready, failed, a first attempt failed, still starting, gone', () => {
    expect(restartOutcome('a', view({}), 800)).toEqual({ text: 'restarted "a": ready (2025-11-25, notes 1.2.0)\n', exitCode: 0 });
    expect(restartOutcome('a', view({ serverInfo: null, era: null }), 800)).toEqual({ text: 'restarted "a": ready (era unknown)\n', exitCode: 0 });
    expect(restartOutcome('a', view({ state: 'failed', lastError: 'spawn nope ENOENT' }), 800)).toEqual({ text: 'restarted "a", and it failed to start: spawn nope ENOENT\n', exitCode: 1 });
    expect(restartOutcome('a', view({ state: 'starting', lastError: 'exited with code 3' }), 800)).toEqual({
      text: 'restarted "a", but its first attempt failed: exited with code 3 (the hub keeps trying; `switchyard servers` shows how it goes)\n',
      exitCode: 1,
    });
    expect(restartOutcome('a', view({ state: 'starting' }), 30_200)).toEqual({ text: 'restarted "a"; still starting after 30 s\n', exitCode: 1 });
    expect(restartOutcome('a', undefined, 10)).toEqual({ text: 'server "a" is no longer running (a reload removed it?)\n', exitCode: 1 });
  });

  it("keeps a server's own text (serverInfo, its error) on one line", () => {
    expect(restartOutcome('a', view({ serverInfo: { name: 'evil\nrestarted "b": ready', version: '1\t2' } }), 800).text).toBe('restarted "a": ready (2025-11-25, evil?restarted "b": ready 1?2)\n');
    expect(restartOutcome('a', view({ state: 'failed', lastError: 'exited\nall fine' }), 800).text).toBe('restarted "a", and it failed to start: exited?all fine\n');
  });
});

describe('servers table', () => {
  it('shows calls in flight and queued, and an open circuit next to the state (as /healthz does)', () => {
    const t = serversTable(
      [
        view({ id: 'h', transport: 'http', state: 'restarting', circuit: 'open', inFlight: 2, queued: 5, lastError: 'circuit open after 3 consecutive failures' }),
        view({ id: 'k', transport: 'http', circuit: 'closed', inFlight: 1 }),
      ],
      0,
    ).split('\n');
    expect(t[0]).toMatch(/^ID\s+STATE\s+ERA\s+SERVER\s+TOOLS\s+IN FLIGHT\s+RESTARTS/);
    expect(t[1]).toMatch(/^h\s+restarting \(circuit open\)\s+2025-11-25\s+notes 1\.2\.0\s+-\s+2 \+5 queued\s+0\s+/);
    expect(t[2]).toMatch(/^k\s+ready\s+2025-11-25\s+notes 1\.2\.0\s+-\s+1\s+0\s+/);
  });

  it("cannot be given extra rows by a server's serverInfo or stderr holding a newline", () => {
    const t = serversTable(
      [view({ id: 'evil', serverInfo: { name: 'x\nfake  ready  2025-11-25', version: '1' }, lastError: 'exited with code 1', stderr: 'Error: a\nfake2  ready' } as Partial<ServerView>)],
      0,
    );
    expect(t.trimEnd().split('\n')).toHaveLength(2);
    expect(t).toContain('x?fake  ready  2025-11-25 1');
    expect(t).toContain('Error: a?fake2  ready');
  });

  it("shows why a ready server has no tools when its list failed (listError), as doctor warns", () => {
    const listError = 'tools/list is larger than the hub takes (more than 10000 items or 8 MiB); stopped after 200 pages';
    const t = serversTable([view({ id: 'big', tools: 0, listError })], 0);
    expect(t.split('\n')[1]).toMatch(new RegExp(`^big\\s+ready\\s.*\\s${listError.replace(/[()]/g, '\\$&')}$`));
    expect(upstreamFindings([view({ id: 'big', listError })])[0]).toMatchObject({ level: 'warn', message: expect.stringContaining(listError) });
    expect(upstreamFindings([view({ id: 'ok', listError: null })])[0]).toMatchObject({ level: 'ok' });
  });

  it('says a server doctor started itself was not ready in the time it was given, not that it "is starting"', () => {
    const [silent, failing] = upstreamFindings([view({ id: 'fs', state: 'starting', era: null }), view({ id: 'web', transport: 'http', state: 'starting', era: null, lastError: 'server/discover failed: HTTP POST failed: ENOTFOUND' })], 15_000);
    expect(silent).toEqual({ level: 'fail', check: 'upstreams', message: expect.stringMatching(/^fs \(stdio\) was not ready after 15 s \(no answer to the handshake yet: a first `npx -y` or `uvx` run may still be downloading it/) });
    expect(failing!.message).toBe('web (http) was not ready after 15 s (last attempt: server/discover failed: HTTP POST failed: ENOTFOUND)');
    // The daemon's own view: a server starting there is just that.
    expect(upstreamFindings([view({ id: 'fs', state: 'starting', era: null })])[0]!.message).toBe('fs (stdio) is starting');
  });
});

describe('doctor on tools', () => {
  const tool = (name: string, extra: Partial<ToolView>): ToolView => ({ name, server: 's', upstreamName: name, era: 'legacy', trust: 'untrusted', flags: [], ...extra });

  it('warns of tools held back: dropped ones (schemas no client can read, a bad x-mcp-header) and schema quarantines too', () => {
    const findings = toolFindings([
      tool('s__ok', {}),
      tool('s__nullschema', { visible: false, hidden: 'dropped: its inputSchema is not an object', flags: ['hidden'] }),
      tool('s__d04', { flags: ['quarantined:schema'], schemaQuarantine: 'unsupported JSON Schema dialect' }),
    ]).filter((f) => f.check === 'quarantine');
    expect(findings).toEqual([
      { level: 'warn', check: 'quarantine', message: 's__nullschema (s) is held back: dropped: its inputSchema is not an object' },
      { level: 'warn', check: 'quarantine', message: 's__d04 (s) is held back: quarantined:schema' },
    ]);
  });

  // With no daemon, doctor lists the tools itself and writes nothing: a changed definition it
  // holds back is no pending change in the ledger, and `tools diff` said "no pending change" to
  // the user this line sent there.
  it('says where a changed definition it found itself can be reviewed (no daemon), and not for the daemon\'s own view', () => {
    const held = [tool('s__echo', { visible: false, flags: ['pin:changed', 'quarantined'] }), tool('s__d04', { flags: ['quarantined:schema'] })];
    expect(toolFindings(held, true).filter((f) => f.check === 'quarantine').map((f) => f.message)).toEqual([
      's__echo (s) is held back: pin:changed, quarantined (seen by this check, which records nothing: once the hub has run and listed it, `switchyard tools diff` shows the change and `tools approve` takes it)',
      's__d04 (s) is held back: quarantined:schema',
    ]);
    expect(toolFindings(held).filter((f) => f.check === 'quarantine').map((f) => f.message)).toEqual(['s__echo (s) is held back: pin:changed, quarantined', 's__d04 (s) is held back: quarantined:schema']);
  });
});
