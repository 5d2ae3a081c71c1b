import { describe, expect, it } from 'vitest';
import { PAGED_LIST_KEEP_MS, PagedLists } from '../../src/router/paged-lists.js';

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `t${i}` }));

describe('PagedLists', () => {
  it("gives a list back only to the view that was served it: another principal's or group's cursor finds nothing", () => {
    const p = new PagedLists(() => 0);
    const list = items(3);
    p.remember({ principal: 'alice' }, 'tools', 'snap', list);
    expect(p.recall({ principal: 'alice' }, 'tools', 'snap')).toBe(list);
    expect(p.recall({ principal: 'bob' }, 'tools', 'snap')).toBeUndefined();
    expect(p.recall({ principal: 'alice', group: 'g' }, 'tools', 'snap')).toBeUndefined();
    expect(p.recall({ principal: 'alice' }, 'prompts', 'snap')).toBeUndefined();
  });

  it('forgets a list not paged for PAGED_LIST_KEEP_MS; each page served keeps it longer', () => {
    let now = 0;
    const p = new PagedLists(() => now);
    p.remember({}, 'tools', 's', items(2));
    now = PAGED_LIST_KEEP_MS - 1;
    expect(p.recall({}, 'tools', 's')).toBeDefined();
    now += PAGED_LIST_KEEP_MS - 1;
    expect(p.recall({}, 'tools', 's')).toBeDefined();
    now += PAGED_LIST_KEEP_MS;
    expect(p.recall({}, 'tools', 's')).toBeUndefined();
  });

  it('keeps at most 64 lists, the least recently served going first', () => {
    const p = new PagedLists(() => 0);
    for (let i = 0; i < 65; i++) p.remember({}, 'tools', `s${i}`, items(1));
    expect(p.recall({}, 'tools', 's0')).toBeUndefined();
    expect(p.recall({}, 'tools', 's1')).toBeDefined();
    expect(p.recall({}, 'tools', 's64')).toBeDefined();
  });
});
