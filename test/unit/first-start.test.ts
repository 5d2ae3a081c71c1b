import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/catalog/catalog.js';
import { Canceller } from '../../src/cancel.js';
import { firstAttemptEnded, firstStarting, promptNamed } from '../../src/hub/first-start.js';

/** A handle whose upstream is an emitter with a settable state and last error (all first-start.ts reads). */
function handle(id: string, prefix: string, state: string, lastError?: string): ServerHandle & { set(s: string, error?: string): void } {
  const upstream = Object.assign(new EventEmitter(), { state, lastError });
  return {
    id,
    config: { prefix } as ServerHandle['config'],
    upstream: upstream as unknown as ServerHandle['upstream'],
    set(s: string, error?: string) {
      upstream.state = s;
      upstream.lastError = error ?? upstream.lastError;
      upstream.emit('state', s, error);
    },
  };
}

describe('firstStarting', () => {
  const a = handle('a', 'a', 'starting');
  const ab = handle('ab', 'a__b', 'starting');
  const ready = handle('r', 'r', 'ready');
  const bare = handle('bare', '', 'starting');
  const all = [a, ab, ready, bare];
  const shown = () => true;

  it("names the server on its first start whose prefix space the name lies in (the longest prefix), when shown", () => {
    expect(firstStarting('a__echo', all, shown)).toEqual([a]);
    expect(firstStarting('a__b__echo', all, shown)).toEqual([ab]);
    expect(firstStarting('a__echo', all, (id) => id !== 'a')).toEqual([]);
  });

  it('names the servers without prefix on their first start for a name in no prefix space (they may own any such name)', () => {
    const bare2 = handle('bare2', '', 'starting');
    expect(firstStarting('echo', all, shown)).toEqual([bare]);
    expect(firstStarting('zz__echo', [...all, bare2], shown)).toEqual([bare, bare2]);
    expect(firstStarting('echo', all, (id) => id !== 'bare')).toEqual([]);
    // A name in a prefix space is that server's, not a bare server's.
    expect(firstStarting('a__echo', all, shown)).toEqual([a]);
  });

  it('names none for a ready server, or one whose first attempt failed', () => {
    expect(firstStarting('r__echo', all, shown)).toEqual([]);
    expect(firstStarting('f__echo', [handle('f', 'f', 'starting', 'process exited with code 1')], shown)).toEqual([]);
    expect(firstStarting('echo', [ready, handle('f', '', 'starting', 'process exited with code 1')], shown)).toEqual([]);
  });
});

describe('firstAttemptEnded', () => {
  it('ends when the server is ready, or when its first attempt fails (the caller hears why at once, not after the retries)', async () => {
    const h = handle('a', 'a', 'starting');
    let done = false;
    const wait = firstAttemptEnded(h, 60_000, undefined).then(() => (done = true));
    await new Promise((r) => setTimeout(r, 5));
    expect(done).toBe(false);
    h.set('ready');
    await wait;
    expect(h.upstream.listenerCount('state')).toBe(0);
    const f = handle('f', 'f', 'starting');
    const failed = firstAttemptEnded(f, 60_000, undefined);
    f.set('starting', 'process exited with code 1');
    await failed;
    expect(f.upstream.listenerCount('state')).toBe(0);
  });

  it('ends at its bound, or when the caller cancels, and at once for a server not starting', async () => {
    const t0 = Date.now();
    await firstAttemptEnded(handle('a', 'a', 'starting'), 30, undefined);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(25);
    const c = new Canceller();
    const h = handle('b', 'b', 'starting');
    const wait = firstAttemptEnded(h, 60_000, c.signal);
    c.abort('gone');
    await wait;
    expect(h.upstream.listenerCount('state')).toBe(0);
    await firstAttemptEnded(handle('c', 'c', 'failed'), 60_000, undefined);
  });
});

describe('promptNamed', () => {
  it("names a prompts/get's prompt, and the prompt a completion/complete completes an argument of; nothing else", () => {
    expect(promptNamed('prompts/get', { name: 'x__greet' })).toBe('x__greet');
    expect(promptNamed('completion/complete', { ref: { type: 'ref/prompt', name: 'x__greet' }, argument: { name: 'n', value: 'a' } })).toBe('x__greet');
    expect(promptNamed('completion/complete', { ref: { type: 'ref/resource', uri: 'file:///x' } })).toBeUndefined();
    expect(promptNamed('completion/complete', { ref: null })).toBeUndefined();
    expect(promptNamed('completion/complete', { ref: 'x__greet' })).toBeUndefined();
    expect(promptNamed('prompts/get', { name: 7 })).toBeUndefined();
    expect(promptNamed('tools/call', { name: 'x__greet' })).toBeUndefined();
  });
});
