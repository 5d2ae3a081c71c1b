/**
 * toLegacyResult for a client's negotiated revision: one older than 2025-06-18 gets content,
 * structured output and tool schemas its revision defines; a current one's result is the
 * upstream's, its arrays not copied (the per-call path does no more for it than before).
 */
import { describe, expect, it } from 'vitest';
import { toLegacyResult } from '../../src/downstream/results.js';

const LINK = { type: 'resource_link', uri: 'file:///a', name: 'a' };

describe('toLegacyResult by negotiated version', () => {
  it('leaves a current client’s content, structured content and output schema as they are', () => {
    const r = { content: [{ type: 'text', text: 'x' }, LINK, { type: 'audio', data: 'AA==', mimeType: 'audio/wav' }], structuredContent: { a: 1 } };
    for (const v of ['2025-06-18', '2025-11-25']) {
      const out = toLegacyResult('tools/call', r, v);
      expect(out.content).toBe(r.content);
      expect(out.structuredContent).toBe(r.structuredContent);
      const tools = { tools: [{ name: 't', inputSchema: { type: 'object' }, outputSchema: { type: 'object' } }] };
      expect(toLegacyResult('tools/list', tools, v).tools).toBe(tools.tools);
    }
  });

  it('copies rather than changes what the core holds', () => {
    const r = { content: [LINK], structuredContent: { a: 1 } };
    const out = toLegacyResult('tools/call', r, '2025-03-26');
    expect(out).toEqual({ content: [{ type: 'text', text: 'a (resource link: file:///a)' }, { type: 'text', text: '{"a":1}' }] });
    expect(r).toEqual({ content: [LINK], structuredContent: { a: 1 } });
  });

  it('keeps a result without content as it is, bar its structured content, and odd blocks untouched', () => {
    expect(toLegacyResult('tools/call', { structuredContent: 'not an object' }, '2024-11-05')).toEqual({});
    expect(toLegacyResult('tools/call', { content: [null, 'x', { type: 'text', text: 't' }] }, '2024-11-05')).toEqual({ content: [null, 'x', { type: 'text', text: 't' }] });
    expect(toLegacyResult('prompts/get', { messages: [null, { role: 'user', content: LINK }] }, '2024-11-05')).toEqual({ messages: [null, { role: 'user', content: { type: 'text', text: 'a (resource link: file:///a)' } }] });
  });
});
