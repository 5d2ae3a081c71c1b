/**
 * What a group shows of an aggregate (groupView) is memoised with the aggregate, and worked out
 * again once the groups are replaced (a reload): a caller that holds an aggregate across the
 * reload (a list or route whose build returned just before it) sees the groups as reloaded.
 * Real groupView and Groups; the aggregate is data.
 */
import { expect, it } from 'vitest';
import { groupView, type Built } from '../../src/catalog/aggregate.js';
import { Groups } from '../../src/catalog/filters.js';
import type { Routed, ServerHandle } from '../../src/catalog/types.js';

function aggregate(names: string[]): Built {
  const server = { id: 'x', config: { prefix: 'x' } } as unknown as ServerHandle;
  const items = names.map((n) => ({ name: `x__${n}`, inputSchema: { type: 'object' } }));
  const byHubName = new Map<string, Routed>(items.map((it, i) => [it.name, { server, upstreamName: names[i], item: it, hubName: it.name }]));
  return { key: '', scopes: 'x', items, byHubName, all: [], templates: [], parts: [], failed: [], views: new Map(), epoch: 0 };
}

it("a group's view of an aggregate held across a reload of the groups shows the reloaded groups", () => {
  const groups = new Groups({ g: { servers: ['x'] } });
  const b = aggregate(['a', 'b']);
  expect(groupView(groups, 'tools', b, 'g').items.map((i) => i.name)).toEqual(['x__a', 'x__b']);
  // Memoised while the groups stay.
  expect(groupView(groups, 'tools', b, 'g')).toBe(groupView(groups, 'tools', b, 'g'));
  groups.replace({ g: { servers: ['x'], deny: ['x__a'] } });
  const v = groupView(groups, 'tools', b, 'g');
  expect(v.items.map((i) => i.name)).toEqual(['x__b']);
  expect(v.byHubName.has('x__a')).toBe(false);
  groups.replace({});
  expect(groupView(groups, 'tools', b, 'g').items).toEqual([]);
});
