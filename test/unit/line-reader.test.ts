/**
 * LineReader: a line over the limit is skipped, never buffered whole; what the reader keeps of it
 * (its two ends, transport/body-ends.ts) has seen every byte of it, across reads.
 */
import { describe, expect, it } from 'vitest';
import { LineReader } from '../../src/transport/line-reader.js';
import { answeredId, BodyEnds } from '../../src/downstream/oversize-body.js';

describe('LineReader', () => {
  it('hands on what it kept of a skipped line, its head and tail across reads, and reads on', () => {
    const lines: string[] = [];
    const skipped: BodyEnds[] = [];
    const r = new LineReader(64, (l) => lines.push(l.toString()), (k) => skipped.push(k));
    const long = JSON.stringify({ result: { text: 'y'.repeat(5000) }, jsonrpc: '2.0', id: 'sy-q-1' });
    r.push(Buffer.from('{"a":1}\n' + long.slice(0, 40)));
    r.push(Buffer.from(long.slice(40, 3000)));
    r.push(Buffer.from(long.slice(3000) + '\n{"b":2}\n'));
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    expect(skipped).toHaveLength(1);
    expect(skipped[0]!.head).toBe(long.slice(0, 512));
    expect(skipped[0]!.tail).toBe(long.slice(-512));
    expect(answeredId(skipped[0]!)).toEqual({ response: true, id: 'sy-q-1' });
    // A line over the limit that ends at EOF, without its newline.
    r.push(Buffer.from('z'.repeat(100)));
    r.end();
    expect(skipped[1]!.head).toBe('z'.repeat(100));
  });
});
