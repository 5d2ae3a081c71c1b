import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { baseName, candidateName, fitsName, nameHash, NAME_RULES, sanitizeName, type NameMode } from '../../src/catalog/names.js';

const modes: NameMode[] = ['strict', 'spec'];
const anyText = fc.string({ unit: 'binary', maxLength: 200 }); // arbitrary unicode, surrogates included
const mode = fc.constantFrom<NameMode>('strict', 'spec');

describe('candidateName', () => {
  it('always yields a name matching the mode, for arbitrary unicode ids, prefixes and names', () => {
    fc.assert(
      fc.property(anyText, anyText, anyText, mode, fc.nat(20), (id, prefix, name, m, attempt) => {
        const { name: out } = candidateName(id, prefix, name, m, attempt);
        expect(out).toMatch(NAME_RULES[m].valid);
      }),
      { numRuns: 2000 },
    );
  });

  it('passes a name that already fits unchanged', () => {
    const validPrefix = fc.stringMatching(/^[A-Za-z0-9_-]{0,20}$/);
    fc.assert(
      fc.property(fc.string(), validPrefix, fc.stringMatching(/^[A-Za-z0-9_.-]{1,110}$/), mode, (id, prefix, name, m) => {
        const base = baseName(prefix, name);
        fc.pre(fitsName(base, m));
        expect(candidateName(id, prefix, name, m)).toEqual({ name: base });
      }),
      { numRuns: 1000 },
    );
  });

  it('is deterministic, and every changed name carries a hash suffix', () => {
    fc.assert(
      fc.property(anyText, anyText, anyText, mode, fc.nat(5), (id, prefix, name, m, attempt) => {
        const a = candidateName(id, prefix, name, m, attempt);
        expect(candidateName(id, prefix, name, m, attempt)).toEqual(a);
        if (a.name !== baseName(prefix, name)) {
          expect(a.name.endsWith(`_${nameHash(id, name, attempt)}`)).toBe(true);
          expect(a.reason).toBeDefined();
        }
      }),
    );
  });

  it('cuts a 100-character name to 64 in strict mode and keeps it in spec mode', () => {
    const long = 'a'.repeat(100);
    const strict = candidateName('srv', 'srv', long, 'strict');
    expect(strict.reason).toBe('too-long');
    expect(strict.name).toHaveLength(64);
    expect(strict.name).toBe(`srv__${'a'.repeat(64 - 5 - 7)}_${nameHash('srv', long)}`);
    expect(candidateName('srv', 'srv', long, 'spec')).toEqual({ name: `srv__${long}` });
    const longer = 'b'.repeat(200);
    const spec = candidateName('srv', 'srv', longer, 'spec');
    expect(spec).toEqual({ name: `srv__${'b'.repeat(128 - 5 - 7)}_${nameHash('srv', longer)}`, reason: 'too-long' });
  });

  it('replaces "." in strict mode only, and "/" in both', () => {
    expect(candidateName('fs', 'fs', 'files.read', 'strict')).toEqual({
      name: `fs__files_read_${nameHash('fs', 'files.read')}`,
      reason: 'sanitized',
    });
    expect(candidateName('fs', 'fs', 'files.read', 'spec')).toEqual({ name: 'fs__files.read' });
    for (const m of modes) {
      expect(candidateName('gh', '', 'repos/list', m)).toEqual({ name: `repos_list_${nameHash('gh', 'repos/list')}`, reason: 'sanitized' });
    }
    // One code point, one underscore, even outside the basic plane.
    expect(sanitizeName('a😀b é', 'strict')).toBe('a_b__');
  });

  it('gives distinct names to tools that sanitize alike', () => {
    const a = candidateName('s', 's', 'a.b', 'strict').name;
    const b = candidateName('s', 's', 'a/b', 'strict').name;
    expect(a).not.toBe(b);
  });

  it('names an empty upstream name under an empty prefix', () => {
    const c = candidateName('s', '', '', 'strict');
    expect(c).toEqual({ name: `_${nameHash('s', '')}`, reason: 'sanitized' });
    expect(candidateName('s', 's', '', 'strict')).toEqual({ name: 's__' });
  });

  it('uses a longer, attempt-specific hash after a collision, even for a name that fits', () => {
    const c1 = candidateName('b', '', 'search', 'strict', 1);
    const c2 = candidateName('b', '', 'search', 'strict', 2);
    expect(c1).toEqual({ name: `search_${nameHash('b', 'search', 1)}`, reason: 'collision' });
    expect(nameHash('b', 'search', 1)).toMatch(/^[0-9a-f]{8}$/);
    expect(nameHash('b', 'search')).toMatch(/^[0-9a-f]{6}$/);
    expect(c2.name).not.toBe(c1.name);
  });
});
