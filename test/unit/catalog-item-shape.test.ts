import { describe, expect, it } from 'vitest';
import { readableItem } from '../../src/catalog/item-shape.js';

describe('readableItem', () => {
  it('passes a well-formed item unchanged (the same object)', () => {
    const tool = { name: 't', title: 'T', description: 'd', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true }, _meta: { a: 1 } };
    expect(readableItem('tools', tool)).toEqual({ item: tool });
    expect((readableItem('tools', tool) as { item: unknown }).item).toBe(tool);
  });

  it('leaves out nulls where a field may be left out: at the top, in prompt arguments and annotations', () => {
    expect(readableItem('prompts', { name: 'p', description: null, arguments: [{ name: 'a', required: null, description: null }] })).toEqual({ item: { name: 'p', arguments: [{ name: 'a' }] } });
    expect(readableItem('resources', { uri: 'x://a', name: 'a', mimeType: null, annotations: { priority: null, audience: ['user'] } })).toEqual({
      item: { uri: 'x://a', name: 'a', annotations: { audience: ['user'] } },
    });
    expect(readableItem('tools', { name: 't', annotations: { title: null, destructiveHint: false } })).toEqual({ item: { name: 't', annotations: { destructiveHint: false } } });
  });

  it('leaves out the icons clients cannot read, not the item', () => {
    const ok = { src: 'data:image/png;base64,AA==', sizes: ['48x48'], theme: 'light' };
    expect(readableItem('tools', { name: 't', icons: [ok, { src: 5 }, { src: 'a', theme: 'blue' }, null] })).toEqual({ item: { name: 't', icons: [ok] } });
    expect(readableItem('prompts', { name: 'p', icons: 'x' })).toEqual({ item: { name: 'p' } });
    expect(readableItem('resources', { uri: 'x://a', name: 'a', icons: [{ src: 'a', sizes: '48x48' }] })).toEqual({ item: { uri: 'x://a', name: 'a' } });
  });

  it('says why an item with a field of another type cannot be read', () => {
    expect(readableItem('tools', { name: 't', execution: 'x' })).toEqual({ problem: 'its execution is string "x"' });
    expect(readableItem('prompts', { name: 'p', arguments: { who: {} } })).toEqual({ problem: 'its arguments is an object' });
    expect(readableItem('prompts', { name: 'p', arguments: [{ description: 'd' }] })).toEqual({ problem: 'its arguments[0].name is missing' });
    expect(readableItem('resources', { uri: 'x://a' })).toEqual({ problem: 'its name is missing' });
    expect(readableItem('resources', { uri: 'x://a', name: null })).toEqual({ problem: 'its name is null' });
    expect(readableItem('resources', { uri: 'x://a', name: 'a', size: '12' })).toEqual({ problem: 'its size is string "12"' });
    expect(readableItem('resourceTemplates', { uriTemplate: 'x://{a}', name: 'a', annotations: { audience: ['model'] } })).toEqual({
      problem: 'its annotations.audience is not a list of "user" and "assistant"',
    });
    expect(readableItem('resources', { uri: 'x://a', name: 'a', annotations: { priority: 2 } })).toEqual({ problem: 'its annotations.priority is number 2, not a number from 0 to 1' });
    expect(readableItem('tools', { name: 't', _meta: [] })).toEqual({ problem: 'its _meta is a list' });
  });
});
