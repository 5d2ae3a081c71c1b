/**
 * MetricsSources.servers() (src/metrics.ts) gives each server's state as an UpstreamState: the
 * state gauge sets 1 for the state it is in and 0 for the others, so a state spelt otherwise
 * would read 0 everywhere. The type makes such a source a type error (npm run typecheck:test).
 */
import { describe, expect, it } from 'vitest';
import { Metrics, type MetricsSources } from '../../src/metrics.js';
import { parseExposition } from '../helpers/prometheus.js';

// @ts-expect-error 'Ready' is no UpstreamState: the gauge would show this server in no state.
const misspelt: ReturnType<MetricsSources['servers']> = [{ id: 'a', state: 'Ready', restarts: 0 }];
void misspelt;

describe('MetricsSources.servers', () => {
  it('sets the state gauge to 1 for the state each server is in', async () => {
    const m = new Metrics({
      servers: () => [{ id: 'a', state: 'ready', restarts: 0 }, { id: 'b', state: 'restarting', restarts: 1 }],
      cacheStats: () => ({ hits: 0, misses: 0, staleServed: 0 }),
      ledgerCounters: () => undefined,
      openSessions: () => 0,
    });
    try {
      const on = parseExposition(await m.text()).samples.filter((s) => s.name === 'switchyard_upstream_state' && s.value === 1);
      expect(on.map((s) => s.labels)).toEqual([{ server: 'a', state: 'ready' }, { server: 'b', state: 'restarting' }]);
    } finally {
      m.close();
    }
  });
});
