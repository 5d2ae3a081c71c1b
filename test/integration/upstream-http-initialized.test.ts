/**
 * The legacy HTTP handshake is bounded end to end: a server that answers initialize but holds
 * the notifications/initialized POST open fails the start within the server's timeout (it held
 * the start, and every later renewal of the session, for good). Real loopback server
 * (test/fixtures/faults/http-faults.mjs), the hub's own upstream client.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { createUpstream } from '../../src/upstream/index.js';
import type { Upstream } from '../../src/upstream/types.js';
import { startFaultHttp, type FaultHttp } from './faults-helpers.js';

describe('a legacy HTTP server that never answers notifications/initialized', () => {
  let f: FaultHttp;
  let u: Upstream | undefined;
  beforeAll(async () => {
    f = await startFaultHttp(join(mkdtempSync(join(tmpdir(), 'switchyard-initialized-')), 'f.log'));
    await f.control({ holdInitialized: true });
  });
  afterAll(async () => {
    await u?.close();
    await f?.stop();
  });

  it('fails the start within the timeout, saying which step hung', async () => {
    // 3 s, not 800 ms: the timeout bounds initialize too, which a loaded machine (load 19) once
    // had the fixture answer after 800 ms, and the start failed at the step before. Bounded end
    // to end: both steps' timeouts and some slack, where it was held for good.
    u = createUpstream({ id: 'h', url: f.url, era: '2025-11-25', timeoutMs: 3000, probeTimeoutMs: 3000, maxFrameBytes: 1 << 20 }, silentLogger);
    const t0 = Date.now();
    await expect(u.start()).rejects.toThrow(/notifications\/initialized: no answer within 3000 ms/);
    expect(Date.now() - t0).toBeLessThan(9_000);
    expect(f.log().some((e) => e.method === 'notifications/initialized')).toBe(true);
  }, 15_000);
});
