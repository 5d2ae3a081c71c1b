/**
 * A modern client's call parked at a legacy stdio server (it answered `input_required`) when the
 * hub begins to stop: no retry can take it any more (a draining hub refuses every request, a
 * retry too), so it ends as the stop begins, not at the drain's deadline. It held that server's
 * call gate alone: a call queued behind it ran only once the drain time was over, and then found
 * its upstream closed. Real built hub, the legacy translation fixture (SDK v1) over stdio, the
 * raw modern wire.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { META_CAPS, modernBody, modernHeaders, modernMeta, post, type Json } from '../helpers/wire.js';
import { nodeServer, startHub } from '../helpers/hub-process.js';
import { waitForReady } from '../helpers/wire.js';
import { LEGACY_FIXTURE, USER_CAPABILITIES } from '../fixtures/translation/peers.js';
import { queryRows, waitForRows } from './ledger-helpers.js';

const DRAIN_MS = 20_000;

describe('a parked call when the hub stops', () => {
  it('ends as the stop begins: a call queued behind it on the same stdio server runs and is answered within the drain', async () => {
    const hub = await startHub({ listen: { drainTimeoutMs: DRAIN_MS }, policy: { inputTimeoutMs: 60_000 }, servers: { ls: nodeServer(LEGACY_FIXTURE) } });
    try {
      await waitForReady(hub.url, ['ls']);
      const db = join(hub.dir, 'ledger.db');
      const asking = 'ls__elicit_form';
      const parked = await post(hub.url, modernBody(1, 'tools/call', { name: asking, arguments: { who: 'parked' } }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', asking));
      expect(parked.body?.result, parked.text).toMatchObject({ resultType: 'input_required' });
      // Queued behind the parked call (a stdio server's asking call runs alone).
      const queued = post(hub.url, modernBody(2, 'tools/call', { name: 'ls__echo', arguments: { text: 'behind' } }, modernMeta({ [META_CAPS]: USER_CAPABILITIES })), modernHeaders('tools/call', 'ls__echo'));
      await waitForRows(db, { tool: 'ls__echo' }, (r) => r.some((x) => x.outcome === 'in_flight'));
      const t0 = Date.now();
      const exited = hub.stop('SIGTERM');
      const r = await queued;
      expect(r.body?.result as Json | undefined, r.text).toMatchObject({ content: [{ type: 'text', text: 'echo:behind' }] });
      expect(await exited).toBe(0);
      expect(Date.now() - t0).toBeLessThan(DRAIN_MS / 2);
      const row = (await queryRows(db, { tool: asking })).find((x) => x.requestId === 1);
      expect(row?.errorMessage).toMatch(/the hub stopped while the call waited for its client to answer/);
    } finally {
      if (hub.proc.exitCode === null) await hub.stop('SIGKILL');
    }
  }, 60_000);
});
