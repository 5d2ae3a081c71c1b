/** Progress lines go to a terminal only; pipes and logs get nothing. */
import { describe, expect, it } from 'vitest';
import { Progress } from '../../src/cli/progress.js';

function stream(isTTY: boolean) {
  const chunks: string[] = [];
  return { chunks, s: { isTTY, columns: 40, write: (c: string) => (chunks.push(c), true) } as unknown as NodeJS.WriteStream };
}

describe('Progress', () => {
  it('rewrites one line on a terminal and clears it at the end', () => {
    const { chunks, s } = stream(true);
    const p = new Progress('connecting upstreams', 2, s);
    p.tick('alpha');
    p.tick('a-very-long-server-name-that-does-not-fit-the-terminal');
    p.end();
    expect(chunks[0]).toBe('\r\x1b[2Kconnecting upstreams 0/2');
    expect(chunks[1]).toBe('\r\x1b[2Kconnecting upstreams 1/2 alpha');
    expect(chunks[2].length).toBeLessThanOrEqual('\r\x1b[2K'.length + 39);
    expect(chunks.at(-1)).toBe('\r\x1b[2K');
  });

  it('writes nothing when stderr is not a terminal', () => {
    const { chunks, s } = stream(false);
    const p = new Progress('x', 3, s);
    p.tick('a');
    p.end();
    expect(chunks).toEqual([]);
  });
});
