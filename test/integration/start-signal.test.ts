/**
 * A supervisor may stop the hub as soon as it reads that the hub listens (a health check that
 * passed, a test harness, `systemctl stop` right after start). Until Node has a SIGTERM
 * handler, SIGTERM's default action kills the process outright: no drain, no "stopped", exit
 * by signal. The handler is installed before the line is written; the preload holds the main
 * thread just after the line reaches stderr, so a signal sent on reading it lands in that
 * window every time.
 */
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

let hub: HubProcess | undefined;
afterAll(async () => {
  await hub?.stop('SIGKILL');
});

describe('switchyard start, stopped as soon as it says it listens', () => {
  it('handles the SIGTERM (drains, logs "stopped", exits 0) instead of dying by it', async () => {
    hub = await startHub({ servers: {} }, { nodeArgs: ['--import', join(ROOT, 'test/fixtures/hold-after-listening.mjs')] });
    const code = await hub.stop('SIGTERM');
    expect({ code, signal: hub.proc.signalCode }, hub.logs.join('\n')).toEqual({ code: 0, signal: null });
    expect(hub.logs.some((l) => l.includes('"msg":"stopped"'))).toBe(true);
    hub = undefined;
  });
});
