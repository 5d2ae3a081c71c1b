/** Reading text/event-stream bodies as their bytes arrive. */
import { describe, expect, it } from 'vitest';
import { SseFeed, type SseEvent } from '../../src/transport/sse.js';

function feed(chunks: (string | Buffer)[], max = 1024): { sse: SseFeed; events: SseEvent[] } {
  const events: SseEvent[] = [];
  const sse = new SseFeed(max, (e) => events.push(e));
  for (const c of chunks) sse.feed(c);
  return { sse, events };
}

describe('SseFeed', () => {
  it('delivers message events across chunk boundaries and skips priming events and comments', () => {
    const { sse, events } = feed([': keep-alive\n\nid: 1\ndata:\n\n', 'id: 2\nda', 'ta: {"a":1}\n\r\n', 'event: message\ndata: {"b":2}\n\n', 'retry: 1500\n\n']);
    expect(sse.result).toEqual({ lastEventId: '2', retryMs: 1500 });
    expect(events).toEqual([{ data: '{"a":1}', id: '2' }, { data: '{"b":2}' }]);
  });

  it('at the end, dispatches an event that bare CRs ended (the parser held the last CR), and not one left incomplete', () => {
    const done = feed(['data: {"a":1}\r\rdata: {"b":2}\r', '\r']);
    expect(done.events).toEqual([{ data: '{"a":1}' }]);
    done.sse.end();
    expect(done.events).toEqual([{ data: '{"a":1}' }, { data: '{"b":2}' }]);
    const cut = feed(['data: {"a":1}\r']);
    cut.sse.end();
    expect(cut.events).toEqual([]);
    // A CRLF split after its CR is one line end, as ever.
    const split = feed(['data: {"a":1}\r', '\n\r', '\n']);
    split.sse.end();
    expect(split.events).toEqual([{ data: '{"a":1}' }]);
  });

  it('keeps a UTF-8 character split between two chunks whole', () => {
    const bytes = Buffer.from('data: {"text":"héllo €"}\n\n');
    const cut = bytes.indexOf(0xe2) + 1; // inside the three bytes of "€"
    const { events } = feed([bytes.subarray(0, cut), bytes.subarray(cut)]);
    expect(events).toEqual([{ data: '{"text":"héllo €"}' }]);
  });

  it('ignores one byte order mark opening the stream, even split over chunks, and only there', () => {
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    expect(feed([bom.subarray(0, 1), Buffer.concat([bom.subarray(1), Buffer.from('data: {"a":1}\n\n')])]).events).toEqual([{ data: '{"a":1}' }]);
    expect(feed(['\uFEFFdata: {"a":1}\n\n']).events).toEqual([{ data: '{"a":1}' }]);
    // Later in the stream it is part of a field name ("\uFEFFdata"), which the format ignores.
    expect(feed(['data: {"a":1}\n\n', '\uFEFFdata: {"b":2}\n\n']).events).toEqual([{ data: '{"a":1}' }]);
  });

  it('ignores events of other types (e.g. the 2024 endpoint event)', () => {
    const { events } = feed(['event: endpoint\ndata: /messages?x=1\n\ndata: {"ok":true}\n\n']);
    expect(events).toEqual([{ data: '{"ok":true}' }]);
  });

  it('takes unknown fields and a bad retry in its stride: only an oversized event stops the read', () => {
    const { sse, events } = feed(['foo: bar\ndata: {"a":1}\n\nretry: soon\n\n', 'x-custom\ndata: {"b":2}\n\n']);
    expect(events).toEqual([{ data: '{"a":1}' }, { data: '{"b":2}' }]);
    expect(sse.result).toEqual({});
  });

  it('takes text chunks as well as bytes', () => {
    const { events } = feed(['data: {"t":"€"}\n', '\n']);
    expect(events).toEqual([{ data: '{"t":"€"}' }]);
  });

  it('throws on an event larger than the bound', () => {
    expect(() => feed([`data: ${'x'.repeat(5000)}`], 1024)).toThrow(/larger than 1024/);
  });
});
