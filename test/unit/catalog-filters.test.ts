import { describe, expect, it } from 'vitest';
import type { ServerConfig } from '../../src/config/types.js';
import { Confirmer } from '../../src/policy/confirm.js';
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

  it("a glob with __ is read on hub names only: another server's own tool called x__echo is not one of x's", () => {
    const g = new Groups({ xonly: { tools: ['x__*', 'read_*'], prompts: ['*__greet'], deny: ['x__secret*', 'drop*'] } });
    // The hub name of a prefix "" server's x__echo is its reserved form.
    expect(g.includes('xonly', 'tools', 'sq', 'x_echo_1a2b3c', 'x__echo')).toBe(false);
    expect(g.includes('xonly', 'tools', 'x', 'x__echo', 'echo')).toBe(true);
    expect(g.includes('xonly', 'prompts', 'sq', 'greet_1a2b3c', 'x__greet')).toBe(false);
    expect(g.includes('xonly', 'prompts', 'x', 'x__greet', 'greet')).toBe(true);
    // Globs without __ still match either name; deny likewise.
    expect(g.includes('xonly', 'tools', 'fs', 'fs__read_file', 'read_file')).toBe(true);
    expect(g.includes('xonly', 'tools', 'x', 'x__secret_key', 'secret_key')).toBe(false);
    expect(g.includes('xonly', 'tools', 'sq', 'x__secret_key', 'x__secret_key')).toBe(false);
    expect(g.includes('xonly', 'tools', 'sq', 'x_secret_key_1a2b3c', 'x__secret_key')).toBe(false); // not in tools either
    expect(g.includes('xonly', 'tools', 'x', 'x__drop', 'drop')).toBe(false);
    // An empty list shows nothing of its kind.
    expect(new Groups({ none: { tools: [] } }).includes('none', 'tools', 'x', 'x__echo', 'echo')).toBe(false);
  });

  // A prefix "" server's x__delete is shown as x_delete_<hash> (a server x exists): its sibling
  // y__delete met `*__delete`, it slipped past.
  it('a deny glob also meets the name a renamed tool had before its fixing', () => {
    const g = new Groups({ safe: { deny: ['*__delete'] } });
    expect(g.includes('safe', 'tools', 'sq', 'y__delete', 'y__delete', '')).toBe(false);
    expect(g.includes('safe', 'tools', 'sq', 'x_delete_1a2b3c', 'x__delete', '')).toBe(false);
    expect(g.includes('safe', 'prompts', 'sq', 'x_delete_1a2b3c', 'x__delete', '')).toBe(false);
    // Without the prefix (resources, callers that do not know it) only the shown names count.
    expect(g.includes('safe', 'tools', 'sq', 'x_delete_1a2b3c', 'x__delete')).toBe(true);
    expect(g.includes('safe', 'tools', 'sq', 'x__read', 'x__read', '')).toBe(true);
    // A prefixed server's long name cut to fit is denied by what it was before the cut.
    expect(g.includes('safe', 'tools', 'fs', 'fs__dele_9f8e7d', 'delete', 'fs')).toBe(false);
  });
});

describe('policy.confirm globs', () => {
  const server = (prefix: string) => ({ id: 'sq', prefix, trust: 'untrusted', tools: undefined }) as unknown as ServerConfig;
  it('meet a renamed tool by the name it had before its fixing, as its siblings', () => {
    const c = new Confirmer({ confirm: ['*__delete'] });
    expect(c.needed('y__delete', server(''), 'y__delete', undefined)).toBe(true);
    expect(c.needed('x_delete_1a2b3c', server(''), 'x__delete', undefined)).toBe(true);
    expect(c.needed('x__read', server(''), 'x__read', undefined)).toBe(false);
    expect(c.needed('fs__read', server('fs'), 'read', undefined)).toBe(false);
  });
});
