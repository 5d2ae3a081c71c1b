/** Reading text/event-stream bodies. */
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readSse, type SseEvent } from '../../src/transport/sse.js';

function feed(chunks: string[], max = 1024, end = true): { done: Promise<unknown>; events: SseEvent[] } {
  const s = new PassThrough();
  const events: SseEvent[] = [];
  const done = readSse(s, max, (e) => events.push(e));
  for (const c of chunks) s.write(c);
  if (end) s.end();
  return { done, events };
}

describe('readSse', () => {
  it('delivers message events across chunk boundaries and skips priming events and comments', async () => {
    const { done, events } = feed([': keep-alive\n\nid: 1\ndata:\n\n', 'id: 2\nda', 'ta: {"a":1}\n\r\n', 'event: message\ndata: {"b":2}\n\n', 'retry: 1500\n\n']);
    expect(await done).toEqual({ lastEventId: '2', retryMs: 1500 });
    expect(events).toEqual([{ data: '{"a":1}', id: '2' }, { data: '{"b":2}' }]);
  });

  it('ignores events of other types (e.g. the 2024 endpoint event)', async () => {
    const { done, events } = feed(['event: endpoint\ndata: /messages?x=1\n\ndata: {"ok":true}\n\n']);
    await done;
    expect(events).toEqual([{ data: '{"ok":true}' }]);
  });

  it('fails on an event larger than the bound', async () => {
    const { done } = feed([`data: ${'x'.repeat(5000)}`], 1024, false);
    await expect(done).rejects.toThrow(/larger than 1024/);
  });

  it('fails when the stream breaks before its end', async () => {
    const s = new PassThrough();
    const done = readSse(s, 1024, () => undefined);
    s.write('data: {}\n\n');
    s.destroy(new Error('socket hang up'));
    await expect(done).rejects.toThrow(/socket hang up/);
  });
});
