/** InputBridge (modern client, legacy upstream): the client's time to answer a parked call's questions. */
import { randomBytes } from 'node:crypto';
import { describe, expect, it, vi } from 'vitest';
import { Canceller } from '../../src/cancel.js';
import { InputBridge, InputCollector } from '../../src/router/input-bridge.js';
import { RequestStateSealer } from '../../src/router/request-state.js';

describe('InputBridge', () => {
  it('a question keeps its time to be answered across a retry, though the wall clock steps forward meanwhile', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    const sealer = new RequestStateSealer(randomBytes(32));
    const bridge = new InputBridge(sealer, 5_000);
    try {
      const caps = { elicitation: {} };
      const collector = new InputCollector(caps);
      const abort = new Canceller();
      const bind = { principal: 'p', method: 'tools/call', target: 't', args: {} };
      const run = collector.ask({ method: 'elicitation/create', params: { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: {} } } });
      const first = await bridge.settle(run, collector, abort, bind);
      expect(first.resultType).toBe('input_required');
      const { id } = sealer.open(first.requestState, bind) as { id: string };
      step = 3_600_000; // a laptop resumed from sleep, NTP
      // A retry that answers nothing: parked again, with what is left of the first 5 s.
      expect((await bridge.resume(id, {}, caps, bind, new Canceller().signal)).resultType).toBe('input_required');
      await new Promise((r) => setTimeout(r, 50));
      // Counted on the wall clock, the client's time was up at the retry: the call was cancelled at once.
      expect(abort.signal.aborted).toBe(false);
      expect(bridge.size).toBe(1);
    } finally {
      bridge.close();
      wall.mockRestore();
    }
  });
});
