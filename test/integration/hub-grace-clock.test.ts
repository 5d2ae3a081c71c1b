/**
 * The hub's start-up grace (SWITCHYARD_STARTUP_GRACE_MS) when the wall clock is stepped (NTP's
 * first sync at boot, an operator): it counts from the hub's start on the monotonic clock. An
 * in-process hub with one failMode "closed" server slow to start; /healthz's answer read from
 * Hub.health().
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { Hub } from '../../src/hub.js';
import { silentLogger } from '../../src/log.js';

afterEach(() => {
  vi.useRealTimers();
  delete process.env.SWITCHYARD_STARTUP_GRACE_MS;
});

describe('the start-up grace, when the wall clock is stepped', () => {
  it('an hour ahead does not end it (calls refused, /healthz "refusing"), an hour back does not keep it past its time', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-grace-clock-'));
    // Read once when the hub is made.
    process.env.SWITCHYARD_STARTUP_GRACE_MS = '30000';
    // A server that never answers its handshake (starting throughout), and ends when its stdin does.
    const guard = { command: process.execPath, args: ['-e', 'process.stdin.resume()'], failMode: 'closed' };
    // Only Date and performance: the server's start is real.
    vi.useFakeTimers({ toFake: ['Date', 'performance'] });
    vi.advanceTimersByTime(1_000);
    const hub = Hub.create(parseConfig({ ledger: { enabled: false }, servers: { guard } }, join(dir, 'hub.config.json'), {}), silentLogger);
    try {
      hub.startUpstreams();
      expect(hub.health().status).toBe('starting');
      vi.setSystemTime(Date.now() + 3_600_000);
      // Before, measured from Date.now() at the hub's start: the grace was over.
      expect(hub.health().status).toBe('starting');
      vi.setSystemTime(Date.now() - 7_200_000);
      vi.advanceTimersByTime(30_001);
      // ...and an hour back kept it an hour longer.
      expect(hub.health().status).toBe('refusing');
    } finally {
      vi.useRealTimers();
      await hub.stop(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
