import { describe, expect, it } from 'vitest';
import { CONSERVATIVE_HINTS, effectiveAnnotations } from '../../src/catalog/annotations.js';
import { Groups, toolFilter } from '../../src/catalog/filters.js';
import { globMatcher } from '../../src/policy/glob.js';

describe('annotations', () => {
  const claimed = { title: 'Reader', readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false, vendor: 'x' };
  it('untrusted: conservative hints, the claimed title only', () => {
    const e = effectiveAnnotations(false, claimed);
    expect(e).toEqual({ annotations: { ...CONSERVATIVE_HINTS, title: 'Reader' }, source: 'conservative' });
    expect(effectiveAnnotations(false, undefined).annotations).toEqual(CONSERVATIVE_HINTS);
    expect(effectiveAnnotations(false, 'junk').annotations).toEqual(CONSERVATIVE_HINTS);
  });
  it('trusted: the claim as made', () => {
    expect(effectiveAnnotations(true, claimed)).toEqual({ annotations: claimed, source: 'server' });
  });
  it('config overrides win for either', () => {
    expect(effectiveAnnotations(false, claimed, { readOnlyHint: true, destructiveHint: false })).toEqual({
      annotations: { ...CONSERVATIVE_HINTS, title: 'Reader', readOnlyHint: true, destructiveHint: false },
      source: 'config',
    });
    expect(effectiveAnnotations(true, claimed, { openWorldHint: true }).annotations.openWorldHint).toBe(true);
  });
});

describe('globs and groups', () => {
  it('* and ? only; everything else literal', () => {
    const m = globMatcher(['fs__read_*', 'a?c', 'x.y'])!;
    expect(['fs__read_file', 'fs__read_', 'abc', 'x.y'].every(m)).toBe(true);
    expect(['fs__write', 'ac', 'xzy', 'fs__read_file2x'.replace('fs', 'gs')].some(m)).toBe(false);
    expect(globMatcher(undefined)).toBeUndefined();
    expect(globMatcher([])!('anything')).toBe(false);
  });
  it('allow then deny', () => {
    const f = toolFilter({ allow: ['read_*', 'list'], deny: ['read_secret*'] });
    expect(['read_file', 'list'].every(f)).toBe(true);
    expect(['write', 'read_secrets'].some(f)).toBe(false);
    expect(toolFilter(undefined)('x')).toBe(true);
    expect(toolFilter({ deny: ['x'] })('y')).toBe(true);
  });
  it('groups select servers, tool globs (hub or upstream name) and deny', () => {
    const g = new Groups({ small: { servers: ['fs'], tools: ['fs__read_*', 'stat'], deny: ['*secret*'] }, all: {}, 'bad name!': {} });
    expect(g.names()).toEqual(['small', 'all']);
    expect(g.includes('small', 'tools', 'fs', 'fs__read_file', 'read_file')).toBe(true);
    expect(g.includes('small', 'tools', 'fs', 'fs__stat', 'stat')).toBe(true);
    expect(g.includes('small', 'tools', 'fs', 'fs__write', 'write')).toBe(false);
    expect(g.includes('small', 'tools', 'fs', 'fs__read_secret', 'read_secret')).toBe(false);
    expect(g.includes('small', 'tools', 'gh', 'gh__read_x', 'read_x')).toBe(false);
    expect(g.includes('small', 'resources', 'fs', 'file:///a')).toBe(true);
    expect(g.includes('all', 'tools', 'gh', 'anything')).toBe(true);
    expect(g.includes('nope', 'tools', 'fs', 'x')).toBe(false);
    expect(g.includes(undefined, 'tools', 'fs', 'x')).toBe(true);
  });
});
