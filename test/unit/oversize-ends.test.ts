/**
 * What the two ends of a message too large to read say of it (downstream/oversize-body.ts), as
 * LineReader keeps them for a stdio line past its limit: a response and the question it answers,
 * or a request and the id its client waits on.
 */
import { describe, expect, it } from 'vitest';
import { answeredId } from '../../src/downstream/oversize-body.js';
import { LineReader } from '../../src/transport/line-reader.js';
import type { BodyEnds } from '../../src/transport/body-ends.js';

const PAD = 'x'.repeat(5_000);

/** The ends LineReader keeps of `text` as one line past a 1,000-byte limit, fed in `chunk`-byte pieces. */
function endsOf(text: string, chunk = 700): BodyEnds {
  let ends: BodyEnds | undefined;
  const lines: Buffer[] = [];
  const reader = new LineReader(1_000, (l) => lines.push(l), (e) => (ends = e));
  const bytes = Buffer.from(`${text}\n{"after":1}\n`);
  for (let i = 0; i < bytes.length; i += chunk) reader.push(bytes.subarray(i, i + chunk));
  expect(lines.map(String)).toEqual(['{"after":1}']);
  return ends!;
}

describe('the ends of a line past the limit', () => {
  it('show a request, its id at the start or the end, and its method when it comes before params', () => {
    expect(answeredId(endsOf(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { pad: PAD } })))).toEqual({ response: false, id: 7, method: 'tools/call' });
    expect(answeredId(endsOf(JSON.stringify({ method: 'tools/call', params: { pad: PAD }, jsonrpc: '2.0', id: 'r"1' })))).toEqual({ response: false, id: 'r"1', method: 'tools/call' });
    expect(answeredId(endsOf(JSON.stringify({ params: { pad: PAD }, method: 'x', id: -3 })))).toEqual({ response: false, id: -3 });
  });

  it('never take an id nested in params, or one followed by other keys, for the request\'s', () => {
    expect(answeredId(endsOf(JSON.stringify({ jsonrpc: '2.0', method: 'x', params: { pad: PAD, id: 5 } })))).toEqual({ response: false, method: 'x' });
    expect(answeredId(endsOf(JSON.stringify({ method: 'x', params: { pad: PAD }, id: 5, note: 'after' })))).toEqual({ response: false, method: 'x' });
  });

  it('show a response and the id it answers, at either end', () => {
    expect(answeredId(endsOf(JSON.stringify({ result: { content: { pad: PAD } }, jsonrpc: '2.0', id: 'sy-a-1' })))).toEqual({ response: true, id: 'sy-a-1' });
    expect(answeredId(endsOf(JSON.stringify({ jsonrpc: '2.0', id: 4, error: { code: -1, message: PAD } })))).toEqual({ response: true, id: 4 });
    expect(answeredId(endsOf(JSON.stringify({ result: { pad: PAD }, id: 4, more: 1 })))).toEqual({ response: true });
  });

  it('say nothing of what is no object', () => {
    expect(answeredId(endsOf(`[${JSON.stringify({ id: 1, method: 'x', params: { pad: PAD } })}]`))).toEqual({});
  });
});
