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

describe('a retry cancelled before it reaches its parked call', () => {
  it("cancels the call, its question answered as the user's no answer: the answers it carried are not given to the upstream", async () => {
    const sealer = new RequestStateSealer(randomBytes(32));
    const bridge = new InputBridge(sealer, 60_000);
    const collector = new InputCollector({ elicitation: {} });
    const bind = { principal: 'p', method: 'tools/call', target: 't', args: {} };
    const asked = collector.ask({ method: 'elicitation/create', params: { mode: 'form', message: 'go?', requestedSchema: { type: 'object', properties: {} } } });
    const abort = new Canceller();
    const run = new Promise<Record<string, unknown>>((_, reject) => abort.signal.addEventListener('abort', () => reject(new Error('cancelled'))));
    const first = await bridge.settle(run, collector, abort, bind);
    const { id } = sealer.open(first.requestState, bind) as { id: string };
    const [key] = Object.keys(first.inputRequests as object);
    const gone = new Canceller();
    gone.abort('the client went away');
    const retried = bridge.resume(id, { [key!]: { action: 'accept', content: {} } }, { elicitation: {} }, bind, gone.signal);
    expect(await asked).toEqual({ action: 'cancel' });
    expect(abort.signal.aborted).toBe(true);
    await expect(retried).rejects.toThrow('cancelled');
  });
});

describe('a call that ends while parked', () => {
  const ask = { method: 'elicitation/create', params: { mode: 'form', message: 'name?', requestedSchema: { type: 'object', properties: {} } } };
  const bind = { principal: 'p', method: 'tools/call', target: 't', args: {} };

  /** A parked call (its first request answered input_required) whose run then ends, its client not back. */
  async function endedWhileParked(timeoutMs: number) {
    const sealer = new RequestStateSealer(randomBytes(32));
    const bridge = new InputBridge(sealer, timeoutMs);
    const collector = new InputCollector({ elicitation: {} });
    void collector.ask(ask).catch(() => undefined);
    let end!: (r: Record<string, unknown>) => void;
    const run = new Promise<Record<string, unknown>>((r) => (end = r));
    const first = await bridge.settle(run, collector, new Canceller(), bind);
    expect(first.resultType).toBe('input_required');
    end({ content: [] });
    await run;
    return { bridge, collector, id: (sealer.open(first.requestState, bind) as { id: string }).id };
  }

  it("keeps its first row's end open until a retry takes it: then that row is a round (handed-on), the retry's the call's end", async () => {
    const { bridge, collector, id } = await endedWhileParked(60_000);
    const known = collector.known();
    expect(known).toBeInstanceOf(Promise);
    const retried = await bridge.resume(id, {}, { elicitation: {} }, bind, new Canceller().signal);
    expect(retried).toEqual({ content: [] });
    expect(await known).toBe('handed-on');
    expect(collector.known()).toBeUndefined();
  });

  it('gives it to the first row once no retry can take it (the time to answer is up)', async () => {
    const { bridge, collector } = await endedWhileParked(50);
    expect(await collector.known()).toBe('asked');
    expect(bridge.size).toBe(0);
  });
});

describe('RequestStateSealer.serverOf', () => {
  it("names the server of a state open() would take; not of one expired, used, or another request's (its retry would wait for that server only to be refused)", () => {
    let now = 1_000_000;
    const sealer = new RequestStateSealer(randomBytes(32), 60_000, () => now);
    const bind = { principal: 'p', method: 'prompts/get', target: 'greet', args: {} };
    const state = () => sealer.seal({ ...bind }, { k: 'fwd', server: 'srv' });
    const s = state();
    expect(sealer.serverOf(s, 'p', 'prompts/get', 'greet')).toBe('srv');
    // Another principal's, another method's or target's, a forged one.
    expect([sealer.serverOf(s, 'q', 'prompts/get', 'greet'), sealer.serverOf(s, 'p', 'resources/read', 'greet'), sealer.serverOf(s, 'p', 'prompts/get', 'other')]).toEqual([undefined, undefined, undefined]);
    expect([sealer.serverOf(`${s.slice(0, -4)}AAAA`, 'p', 'prompts/get', 'greet'), sealer.serverOf('sy1.', 'p', 'prompts/get', 'greet'), sealer.serverOf(42, 'p', 'prompts/get', 'greet')]).toEqual([undefined, undefined, undefined]);
    // Used once already.
    sealer.open(s, { ...bind });
    expect(sealer.serverOf(s, 'p', 'prompts/get', 'greet')).toBeUndefined();
    // Expired.
    const late = state();
    now += 60_000;
    expect(sealer.serverOf(late, 'p', 'prompts/get', 'greet')).toBeUndefined();
    expect(() => sealer.open(late, { ...bind })).toThrow(/expired/);
  });
});

describe('RequestStateSealer.open', () => {
  // A tool group is an authorization boundary (an API key limited to groups): one principal's
  // state from one group's endpoint was taken on another's, or on /mcp, resuming there a call
  // (a parked one, another server's round) of the other endpoint.
  it("takes a state only on the endpoint (tool group) it was issued on: not another group's, nor /mcp's", () => {
    const sealer = new RequestStateSealer(randomBytes(32));
    const bind = { principal: 'gina', method: 'tools/call', target: 'a__echo', args: {} };
    const small = () => sealer.seal({ ...bind, group: 'small' }, { k: 'fwd', server: 'a' });
    expect(() => sealer.open(small(), { ...bind, group: 'narrow' })).toThrow('requestState was issued on another endpoint (tool group)');
    expect(() => sealer.open(small(), { ...bind })).toThrow('requestState was issued on another endpoint (tool group)');
    expect(() => sealer.open(sealer.seal({ ...bind }, { k: 'confirm' }), { ...bind, group: 'small' })).toThrow(/another endpoint/);
    expect(sealer.open(small(), { ...bind, group: 'small' })).toEqual({ k: 'fwd', server: 'a' });
    expect(sealer.open(sealer.seal({ ...bind }, { k: 'confirm' }), { ...bind })).toEqual({ k: 'confirm' });
  });
});
