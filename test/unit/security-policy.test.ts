/**
 * The pure parts of the security policy: pattern classification, schema bounds, the
 * validator's dialects and caching, token buckets (fake clock), globs and tool scopes.
 */
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/log.js';
import { GlobTable, compileGlob } from '../../src/policy/glob.js';
import { RateLimiter, TokenBuckets } from '../../src/policy/rate-limit.js';
import { classifyPattern } from '../../src/policy/safe-regex.js';
import { depthExceeds, schemaOutOfBounds, type SchemaLimits } from '../../src/policy/schema-bounds.js';
import { ToolScopes, missingScopes } from '../../src/policy/scopes.js';
import { SchemaValidator } from '../../src/policy/validate.js';

describe('classifyPattern', () => {
  it.each([
    ['^(a+)+$', 'reject'],
    ['(\\w+\\s?)*$', 'reject'],
    ['^(a*)*b', 'reject'],
    ['((ab)+c)+', 'reject'],
    ['(a{1,100}){2,}', 'reject'],
    ['(x)\\1', 'reject'],
    ['(?<n>x)\\k<n>', 'reject'],
    ['(a|aa)*', 'sandbox'],
    ['(\\d|\\w)+x', 'sandbox'],
    ['^\\d*\\d*x$', 'sandbox'],
    ['^(?=.*\\d).+$', 'sandbox'],
    ['^[a-z0-9_-]+$', 'native'],
    ['^\\d{4}-\\d{2}-\\d{2}$', 'native'],
    ['^(\\d{1,3}\\.){3}\\d{1,3}$', 'native'],
    ['^(foo|bar)+$', 'native'],
    ['[(]+\\)', 'native'],
    ['^a{2,5}b?$', 'native'],
    // Nested bounded repeats whose counts multiply: exponential on a near miss.
    ['^(a{1,16}){1,16}$', 'sandbox'],
    ['^(?:\\w{1,16}\\s?){1,16}$', 'sandbox'],
    ['^((a{1,5}){1,5}){1,5}$', 'sandbox'],
    ['^((a{1,4}){1,4}){1,4}$', 'native'], // 64 ways at most
    ['^(?:[a-z]{2,8}-){1,9}$', 'sandbox'],
    ['^([a-z]{1,8}\\.){1,4}[a-z]{2,6}$', 'native'],
  ])('%s → %s', (p, kind) => {
    expect(classifyPattern(p).kind).toBe(kind);
  });

  // Each row holds one rule of the reader at its edge (mutation testing found them unpinned).
  const NESTED = 'nested repetition (a repeated group that itself repeats)';
  it.each([
    // Braces: a count, at least, between; a brace that is no quantifier is a literal.
    ['^a{3}$', 'native'],
    ['a{,5}b', 'native'],
    ['a{2,}b{2,}', 'sandbox', 'several unbounded quantifiers'],
    // Past 16, a bounded repeat counts as unbounded.
    ['^a{16}b{16}$', 'native'],
    ['^a{17}b{17}$', 'sandbox', 'several unbounded quantifiers'],
    ['^(a{17})+$', 'reject', NESTED],
    ['^(a{2}){17}$', 'native'],
    // Lazy quantifiers backtrack alike.
    ['a+?', 'native'],
    ['a+?b+?', 'sandbox', 'several unbounded quantifiers'],
    ['^(a+?)+$', 'reject', NESTED],
    // Repeated alternation is native only for plain literals none of which begins another.
    ['^(ab|cd)+$', 'native'],
    ['^(?:a|b)*$', 'native'],
    ['^(a|ab)+$', 'sandbox', 'repeated alternation'],
    ['^(a.|b)+$', 'sandbox', 'repeated alternation'],
    ['^(|a)+$', 'sandbox', 'repeated alternation'],
    // Backreferences by number or name; \0 and a lone \k are none.
    ['(a)\\10', 'reject', 'backreference'],
    ['\\0', 'native'],
    ['\\k', 'native'],
    // Classes, as JavaScript reads them: `[]` and `[^]` are whole classes (a "]" right after
    // "[" or "[^" closes it), so what follows them is read; escapes and parentheses inside a
    // class are literals.
    ['[^](a+)+$', 'reject', NESTED],
    ['[](a+)+$', 'reject', NESTED],
    ['x[^]*(\\w+\\s?)*$', 'reject', NESTED],
    ['[^]*', 'native'],
    ['[a(]+', 'native'],
    ['[\\](a+)+]', 'native'], // one class: its escaped "]" does not end it
    ['[\\]]+x', 'native'],
    ['[)]+', 'native'],
    ['\\(a+\\)+', 'sandbox', 'several unbounded quantifiers'],
    // Groups: every lookaround goes to the sandbox; named and non-capturing groups are groups.
    ['(?=a)', 'sandbox', 'lookaround'],
    ['(?!a)b', 'sandbox', 'lookaround'],
    ['(?<=a)b', 'sandbox', 'lookaround'],
    ['(?<!a)b', 'sandbox', 'lookaround'],
    ['(?<year>\\d{4})-', 'native'],
    ['(?:ab)+', 'native'],
    // A group passes on what repeats inside it, and its largest count, to the group around it.
    ['((a+))+$', 'reject', NESTED],
    ['(a|b)(c+)+', 'reject', NESTED],
    ['^((a{1,8})){1,16}$', 'sandbox', 'nested repetition'],
    ['(?:a{1,8}){1,16}', 'sandbox', 'nested repetition'],
    ['(?<$x_1>a{1,8}){1,16}', 'sandbox', 'nested repetition'],
    ['(?<n>a+)+$', 'reject', NESTED],
    ['(?<n1>a)(?<n2>b)', 'native'],
    ['(?:a)(?<n>b+)+', 'reject', NESTED], // a group's own "(?…" is read where it stands, not further on
    ['^(?:(a)b)+$', 'native'], // a group that does not repeat makes its parent no repeater
    // "?" repeats at most once, so it adds no repetition of its own.
    ['(a+)?$', 'native'],
    ['(a+)?b+', 'sandbox', 'several unbounded quantifiers'],
    ['(a){1}b+', 'native'],
    ['(a', 'reject', 'unbalanced parenthesis'],
    ['a)', 'reject', 'unbalanced parenthesis'],
  ] as [string, string, string?][])('%s → %s %s', (p, kind, why) => {
    expect(classifyPattern(p)).toEqual(why === undefined ? { kind } : { kind, why });
  });
});

describe('schema bounds', () => {
  it('counts depth, size, nodes and enum length without recursion', () => {
    let deep: unknown = { type: 'string' };
    for (let i = 0; i < 100_000; i++) deep = { not: deep };
    expect(schemaOutOfBounds(deep, '{}')).toMatch(/nested deeper/);
    expect(schemaOutOfBounds({ enum: Array.from({ length: 6000 }, (_, i) => i) }, '[]')).toMatch(/enum/);
    expect(schemaOutOfBounds({}, 'x'.repeat(300_000))).toMatch(/larger than/);
    expect(schemaOutOfBounds({ type: 'object', properties: { a: { type: 'string' } } }, '{}')).toBeUndefined();
    let data: unknown = 0;
    for (let i = 0; i < 100_000; i++) data = [data];
    expect(depthExceeds(data, 64)).toBe(true);
    expect(depthExceeds({ a: [1, { b: 2 }] }, 64)).toBe(false);
  });

  it('forgets compiled schemas it evicts: ajv holds no more than the cache does', () => {
    const w = new SchemaValidator(silentLogger);
    try {
      for (let i = 0; i < 4200; i++) w.checkArgs(`e${i}`, { inputSchema: { type: 'object', properties: { [`p${i}`]: { type: 'string' } } } }, {});
      const ajv = (w as unknown as { ajv: Record<string, { _cache: Map<unknown, unknown> }> }).ajv['2020-12'];
      expect(ajv._cache.size).toBeLessThanOrEqual(4096 + 16);
    } finally {
      w.close();
    }
  });

  it('holds each limit exactly: at the limit is in, one past it is out', () => {
    const L: SchemaLimits = { maxBytes: 100, maxDepth: 3, maxNodes: 10, maxObjects: 5, maxEnum: 2, maxExpandedNodes: 10 };
    const ok = (schema: unknown, serialised = '{}') => expect(schemaOutOfBounds(schema, serialised, L), JSON.stringify(schema)).toBeUndefined();
    // Bytes, not characters: "é" is two.
    ok({}, 'é'.repeat(50));
    expect(schemaOutOfBounds({}, 'é'.repeat(51), L)).toBe('schema larger than 100 bytes');
    // Nodes: objects, arrays and values, the root included.
    const values = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));
    ok(values(9));
    expect(schemaOutOfBounds(values(10), '{}', L)).toBe('schema has more than 10 nodes');
    ok([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(schemaOutOfBounds([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], '{}', L)).toBe('schema has more than 10 nodes');
    // Depth: objects and arrays count, values below them do not.
    ok({ a: { b: {} } });
    ok({ a: { b: { c: 1, d: null } } });
    ok([[[]]]);
    expect(schemaOutOfBounds({ a: { b: { c: {} } } }, '{}', L)).toBe('schema nested deeper than 3 levels');
    expect(schemaOutOfBounds([[[[]]]], '{}', L)).toBe('schema nested deeper than 3 levels');
    expect(schemaOutOfBounds({ a: [{ b: {} }] }, '{}', L)).toBe('schema nested deeper than 3 levels');
    // Enums, wherever they are; an `enum` that is no array is not counted.
    ok({ enum: [1, 2] });
    ok({ enum: 'abc' });
    expect(schemaOutOfBounds({ enum: [1, 2, 3] }, '{}', L)).toBe('enum with more than 2 values');
    expect(schemaOutOfBounds({ anyOf: [{ enum: [1, 2, 3] }] }, '{}', L)).toBe('enum with more than 2 values');
    // Objects (arrays are not).
    ok({ a: {}, b: {}, c: {}, d: [[], []] });
    ok({ a: {}, b: {}, c: {}, d: {} });
    expect(schemaOutOfBounds({ a: {}, b: {}, c: {}, d: {}, e: {} }, '{}', L)).toBe('schema has more than 5 objects (subschemas and maps of them)');
    // Nodes once local $refs are read in place: a (3 nodes) counted again where p names it.
    ok({ $defs: { a: { x: 1, y: 2 } }, p: { $ref: '#/$defs/a' } });
    expect(schemaOutOfBounds({ $defs: { a: { x: 1, y: 2 } }, p: { $ref: '#/$defs/a' }, z: 0 }, '{}', L)).toBe('schema expands to more than 10 nodes through its $refs');

    expect(depthExceeds({ a: { b: {} } }, 3)).toBe(false);
    expect(depthExceeds({ a: { b: { c: 1, d: null } } }, 3)).toBe(false);
    expect(depthExceeds({ a: { b: { c: {} } } }, 3)).toBe(true);
    expect(depthExceeds([[[[]]]], 3)).toBe(true);
    expect(depthExceeds({ a: [{ b: {} }] }, 3)).toBe(true);
    expect(depthExceeds(null, 0)).toBe(false);
  });
});

describe('SchemaValidator', () => {
  const v = new SchemaValidator(silentLogger);
  afterAll(() => v.close());

  it("an argument named as a property of every object (constructor, toString, valueOf, hasOwnProperty) is absent when left out, not Object's", () => {
    const names = ['constructor', 'toString', 'valueOf', 'hasOwnProperty'];
    const optional = { type: 'object', properties: Object.fromEntries(names.map((n) => [n, { type: 'string' }])) };
    // Left out, optional: valid (the hub refused every such call: "arguments/constructor must be string").
    expect(v.checkArgs('o1', { inputSchema: optional }, {})).toEqual({ ok: true });
    expect(v.checkArgs('o1', { inputSchema: optional }, { toString: 1 })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/toString' });
    const d7 = { ...optional, $schema: 'http://json-schema.org/draft-07/schema#' };
    expect(v.checkArgs('o2', { inputSchema: d7 }, {})).toEqual({ ok: true });
    // Required and left out: missing (it passed, and the call went upstream without it).
    for (const [i, n] of names.entries()) {
      expect(v.checkArgs(`o3${i}`, { inputSchema: { type: 'object', required: [n] } }, {}), n).toMatchObject({ ok: false, kind: 'invalid' });
      expect(v.checkArgs(`o3${i}`, { inputSchema: { type: 'object', required: [n] } }, { [n]: 'x' }), n).toEqual({ ok: true });
    }
  });

  it('2020-12 by default, draft-07 when $schema says so, other dialects reported', () => {
    // prefixItems is a 2020-12 keyword; draft-07 ignores it.
    const tuple = { type: 'object', properties: { t: { type: 'array', prefixItems: [{ type: 'string' }] } } };
    expect(v.checkArgs('t1', { inputSchema: tuple }, { t: [1] })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/t/0' });
    // draft-07 `items: [..]` is a tuple; in 2020-12 an array there is not a schema.
    const d7 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { t: { type: 'array', items: [{ type: 'string' }] } } };
    expect(v.checkArgs('t2', { inputSchema: d7 }, { t: [1] })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/t/0' });
    expect(v.checkArgs('t2', { inputSchema: d7 }, { t: ['x'] })).toEqual({ ok: true });
    const d2019 = { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object' };
    expect(v.checkArgs('t3', { inputSchema: d2019 }, {})).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/unsupported JSON Schema dialect/) });
    expect(v.flagged.get('t3')).toMatch(/unsupported/);
    // A $schema that is no string is no dialect, whatever it holds: one with a "toString" of its
    // own (no primitive for String()) threw, and a call of the tool was -32603 "internal error".
    for (const odd of [5, { toString: 1 }, JSON.parse('{"valueOf":1,"toString":"x"}')]) {
      const inputSchema = { $schema: odd, type: 'object' };
      expect(v.checkArgs('t4', { inputSchema }, {})).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/unsupported JSON Schema dialect/) });
    }
    // Its server changes the schema to one the hub can use: no longer quarantined.
    expect(v.checkArgs('t3', { inputSchema: { type: 'object' } }, {})).toEqual({ ok: true });
    expect(v.flagged.has('t3')).toBe(false);
  });

  it('keeps each tool\'s $id to itself and compiles a schema once', () => {
    const one = { $id: 'https://x.test/s', type: 'object', properties: { a: { type: 'number' } } };
    const two = { $id: 'https://x.test/s', type: 'object', properties: { a: { type: 'string' } } };
    expect(v.checkArgs('one', { inputSchema: one }, { a: 'x' })).toMatchObject({ ok: false });
    expect(v.checkArgs('two', { inputSchema: two }, { a: 'x' })).toEqual({ ok: true });
    // Same content under another object: the cached compile serves it (a copy made later is
    // equal). Counted, not timed: compiling each copy again took ~0.7 s for the thousand here.
    const ajv = (v as unknown as { ajv: Record<'2020-12', { compile(schema: object): unknown }> }).ajv['2020-12'];
    const compile = vi.spyOn(ajv, 'compile');
    try {
      for (let i = 0; i < 1000; i++) expect(v.checkArgs('two', { inputSchema: structuredClone(two) }, { a: 'y' })).toEqual({ ok: true });
      expect(compile).not.toHaveBeenCalled();
      expect(v.checkArgs('three', { inputSchema: { ...two, $id: 'https://x.test/t' } }, { a: 'y' })).toEqual({ ok: true });
      expect(compile).toHaveBeenCalledTimes(1); // the spy sees a compile when there is one
    } finally {
      compile.mockRestore();
    }
  });

  it('a slow schema compile is logged with the tool whose schema it was', () => {
    const warned: unknown[] = [];
    const log = { ...silentLogger, warn: (obj: unknown) => void warned.push(obj) } as typeof silentLogger;
    const timed = new SchemaValidator(log, { compileWarnMs: -1 });
    try {
      expect(timed.checkArgs('srv__slow', { inputSchema: { type: 'object' } }, {})).toEqual({ ok: true });
      expect(warned).toEqual([{ tool: 'srv__slow', ms: expect.any(Number) }]);
    } finally {
      timed.close();
    }
  });

  it('keeps no more than its bound of compiled schemas however many it has seen (ajv keeps what it compiled until a fresh instance takes over)', () => {
    const small = new SchemaValidator(silentLogger, { cacheMax: 50 });
    try {
      const schemaOf = (i: number) => ({ type: 'object', properties: { [`p${i}`]: { type: 'string', pattern: `^a${i}$` } } });
      for (let i = 0; i < 300; i++) {
        expect(small.checkArgs(`gen${i}`, { inputSchema: schemaOf(i) }, { [`p${i}`]: `a${i}` })).toEqual({ ok: true });
        expect(small.checkArgs(`gen${i}`, { inputSchema: schemaOf(i) }, { [`p${i}`]: 'b' })).toMatchObject({ ok: false, kind: 'invalid', pointer: `/p${i}` });
      }
      // What ajv holds on to: every compiled schema stays in its instance's scope (removeSchema
      // leaves it there), so only a fresh instance lets them go.
      const ajv = (small as unknown as { ajv: Record<'2020-12', { scope: { _scope: { schema?: unknown[]; pattern?: unknown[] } } }> }).ajv['2020-12'];
      expect(ajv.scope._scope.schema?.length ?? 0).toBeLessThan(100); // 50, and the meta-schemas
      expect(ajv.scope._scope.pattern?.length ?? 0).toBeLessThan(100);
      // An early schema is compiled again when it comes back, and still checked.
      expect(small.checkArgs('gen0', { inputSchema: schemaOf(0) }, { p0: 'b' })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/p0' });
    } finally {
      small.close();
    }
  });

  it('a flat schema of thousands of properties is refused by its count at once, not compiled into a stack overflow (misread as a $ref loop)', () => {
    const flat = (n: number) => ({ type: 'object', properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string' }])) });
    const t0 = performance.now();
    const r = v.checkArgs('flat3000', { inputSchema: flat(3000) }, { p1: 'a' });
    expect(r).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/more than 1000 objects/) });
    expect(performance.now() - t0).toBeLessThan(2_000); // compiled, it took 12 s to overflow
    expect(v.checkArgs('flat200', { inputSchema: flat(200) }, { p1: 1 })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/p1' });
  });

  it('quarantines a schema whose $refs loop without end (allOf), rather than blaming the arguments', () => {
    const loop = { type: 'object', properties: { x: { $ref: '#/$defs/A' } }, $defs: { A: { allOf: [{ $ref: '#/$defs/B' }] }, B: { allOf: [{ $ref: '#/$defs/A' }] } } };
    expect(v.checkArgs('loop', { inputSchema: loop }, { x: 1 })).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/refers to itself without end/) });
    // and stays so for the next call
    expect(v.checkArgs('loop', { inputSchema: loop }, { x: 2 })).toMatchObject({ ok: false, kind: 'unusable' });
  });

  it('refuses unresolved network $refs instead of treating them as permissive', () => {
    const r = v.checkArgs('ref', { inputSchema: { type: 'object', properties: { a: { $ref: 'https://schemas.test/a.json' } } } }, { a: 1 });
    expect(r).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/does not fetch/) });
  });

  it('tells an unresolved $ref as the schema wrote it: a local one it does not define, a relative one the hub does not fetch', () => {
    const refusal = (name: string, inputSchema: unknown) => v.checkArgs(name, { inputSchema }, { a: 1 });
    expect(refusal('noDef', { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } })).toEqual({
      ok: false,
      kind: 'unusable',
      reason: 'the schema refers to "#/$defs/missing", which it does not define',
    });
    expect(refusal('ownId', { $id: 'https://x.test/s.json', type: 'object', properties: { a: { $ref: '#/$defs/missing' } } })).toMatchObject({
      reason: 'the schema refers to "#/$defs/missing", which it does not define',
    });
    expect(refusal('relative', { type: 'object', properties: { a: { $ref: 'defs.json#/a' } } })).toEqual({
      ok: false,
      kind: 'unusable',
      reason: 'the schema references "defs.json#/a", which the hub does not fetch',
    });
  });

  it('an enum or const refusal names the values a caller may give (cut short for a long enum)', () => {
    const tool = { inputSchema: { type: 'object', properties: { c: { const: 'x' }, e: { enum: [1, 'two', null] }, big: { enum: Array.from({ length: 300 }, (_, i) => `value-${i}`) } } } };
    expect(v.checkArgs('choices', tool, { c: 'y' })).toEqual({ ok: false, kind: 'invalid', pointer: '/c', reason: 'must be "x"' });
    expect(v.checkArgs('choices', tool, { e: 3 })).toEqual({ ok: false, kind: 'invalid', pointer: '/e', reason: 'must be one of 1, "two", null' });
    const big = v.checkArgs('choices', tool, { big: 'nope' });
    expect(big).toMatchObject({ ok: false, kind: 'invalid', pointer: '/big', reason: expect.stringMatching(/^must be one of "value-0", "value-1", .*, … \(300 values\)$/) });
    expect((big as { reason: string }).reason.length).toBeLessThan(260);
  });

  it('multipleOf takes decimal amounts whose binary quotient is off by a rounding error (0.07 of 0.01), and still refuses what is not a multiple', () => {
    const cents = { type: 'object', properties: { p: { type: 'number', multipleOf: 0.01 } } };
    const refused = Array.from({ length: 1000 }, (_, k) => k / 100).filter((p) => !v.checkArgs('cents', { inputSchema: cents }, { p }).ok);
    expect(refused).toEqual([]);
    expect(v.checkArgs('cents', { inputSchema: cents }, { p: 0.015 })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/p' });
    const tenths = { type: 'object', properties: { p: { type: 'number', multipleOf: 0.1 } } };
    expect(v.checkArgs('tenths', { inputSchema: tenths }, { p: 0.3 })).toEqual({ ok: true });
    expect(v.checkArgs('tenths', { inputSchema: tenths }, { p: 0.35 })).toMatchObject({ ok: false, kind: 'invalid' });
  });

  it('a pattern with escaped punctuation Unicode mode refuses (\\-, \\_) means what it says, in-process and in the sandbox; other dialects stay refused', () => {
    const tool = (pattern: string) => ({ inputSchema: { type: 'object', properties: { p: { type: 'string', pattern } } } });
    const phone = tool('^\\d{3}\\-\\d{4}$');
    expect(v.checkArgs('phone', phone, { p: '555-1234' })).toEqual({ ok: true });
    expect(v.checkArgs('phone', phone, { p: '555x1234' })).toMatchObject({ ok: false, kind: 'invalid', pointer: '/p' });
    // In a class the escaped hyphen is no range: a, _, - and z only.
    const cls = tool('^[a\\_\\-z]+$');
    expect(v.checkArgs('cls', cls, { p: 'a_-z' })).toEqual({ ok: true });
    expect(v.checkArgs('cls', cls, { p: 'b' })).toMatchObject({ ok: false, kind: 'invalid' });
    // A lookahead runs in the sandbox, which gets the same reading.
    const look = tool('^(?=.*\\_)\\w+$');
    expect(v.checkArgs('look', look, { p: 'a_b' })).toEqual({ ok: true });
    expect(v.checkArgs('look', look, { p: 'ab' })).toMatchObject({ ok: false, kind: 'invalid' });
    // Python's \Z and named groups are no ECMA-262: the tool stays quarantined.
    expect(v.checkArgs('python', tool('^a\\Z'), { p: 'a' })).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/Invalid escape/) });
    expect(v.flagged.has('phone')).toBe(false);
  });

  it('names draft-07 and 2020-12 in either spelling ajv would not know (http/https, with or without #)', () => {
    for (const $schema of ['https://json-schema.org/draft-07/schema#', 'http://json-schema.org/draft-07/schema', 'http://json-schema.org/draft/2020-12/schema', 'https://json-schema.org/draft/2020-12/schema#']) {
      const schema = { $schema, type: 'object', properties: { n: { type: 'integer' } } };
      expect(v.checkArgs(`sp-${$schema}`, { inputSchema: schema }, { n: 1 }), $schema).toEqual({ ok: true });
      expect(v.checkArgs(`sp-${$schema}`, { inputSchema: schema }, { n: 'x' }), $schema).toMatchObject({ ok: false, kind: 'invalid', pointer: '/n' });
    }
  });

  it('an outputSchema that cannot be used refuses the call before it runs (its result could never be checked)', () => {
    const tool = { inputSchema: { type: 'object' }, outputSchema: { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object' } };
    expect(v.checkArgs('outbad', tool, {})).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/^its outputSchema cannot be used: unsupported JSON Schema dialect/) });
  });

  it('a $ref graph that expands exponentially is refused at compile, in linear time; recursion and reuse are fine', () => {
    const defs: Record<string, unknown> = { d30: { type: 'string' } };
    for (let i = 0; i < 30; i++) defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] };
    const t0 = performance.now();
    const r = v.checkArgs('expands', { inputSchema: { type: 'object', properties: { x: { $ref: '#/$defs/d0' } }, $defs: defs } }, { x: 1 });
    expect(performance.now() - t0).toBeLessThan(500); // 2^30 paths were never tried
    expect(r).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/expands to more than 50000 nodes through its \$refs/) });
    // A recursive tree, and one definition used in many places, are ordinary schemas.
    const tree = { type: 'object', properties: { name: { type: 'string' }, children: { type: 'array', items: { $ref: '#' } } } };
    expect(v.checkArgs('tree', { inputSchema: tree }, { name: 'a', children: [{ name: 'b', children: [] }] })).toEqual({ ok: true });
    const addr = { type: 'object', properties: Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`f${i}`, { type: 'string' }])) };
    const reuse = { type: 'object', properties: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`a${i}`, { $ref: '#/$defs/addr' }])), $defs: { addr } };
    expect(v.checkArgs('reuse', { inputSchema: reuse }, { a0: { f0: 'x' } })).toEqual({ ok: true });
  });

  it('a $ref chain whose hops times nesting would overflow the stack is refused, not thrown', () => {
    const defs: Record<string, unknown> = {};
    for (let i = 0; i < 250; i++) {
      let inner: unknown = i + 1 < 250 ? { $ref: `#/$defs/d${i + 1}` } : { type: 'string' };
      for (let d = 0; d < 40; d++) inner = [inner];
      defs[`d${i}`] = { 'x-deep': inner };
    }
    const r = v.checkArgs('deepref', { inputSchema: { type: 'object', properties: { x: { $ref: '#/$defs/d0' } }, $defs: defs } }, { x: {} });
    expect(r).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/nests too deeply through its \$refs/) });
  });

  it('a long value that takes a pattern past its budget is refused; the tool stays usable for everyone else', () => {
    const tool = { inputSchema: { type: 'object', properties: { id: { type: 'string', pattern: '[a-z]+[0-9]' } } } };
    expect(v.checkArgs('budget', tool, { id: 'abc1' })).toEqual({ ok: true });
    const long = v.checkArgs('budget', tool, { id: 'a'.repeat(200_000) });
    expect(long).toMatchObject({ ok: false, kind: 'invalid', reason: expect.stringMatching(/too costly to check/) });
    expect(v.checkArgs('budget', tool, { id: 'abc1' })).toEqual({ ok: true });
    expect(v.flagged.has('budget')).toBe(false);
  });

  it('a string of a thousand characters past the budget of a polynomial pattern refuses that call; it does not quarantine the tool', () => {
    // Three unbounded quantifiers, unanchored as JSON Schema patterns are: cubic or worse on a
    // near miss, ~200 ms at 1,024 characters. Only a short string past the budget shows that a
    // pattern backtracks exponentially.
    const tool = { inputSchema: { type: 'object', properties: { to: { type: 'string', pattern: '\\S+@\\S+\\.\\S+' } } } };
    expect(v.checkArgs('mail', tool, { to: 'bob@example.com' })).toEqual({ ok: true });
    const r = v.checkArgs('mail', tool, { to: 'a@'.repeat(600) });
    expect(r).toMatchObject({ ok: false, kind: 'invalid', reason: expect.stringMatching(/1200 characters .*too costly to check/) });
    expect(v.checkArgs('mail', tool, { to: 'bob@example.com' })).toEqual({ ok: true });
    expect(v.flagged.has('mail')).toBe(false);
  });

  it('the pattern checks of one value share a budget: many strings each under the budget of one check cannot hold the hub for long', () => {
    // A common e-mail pattern with several unbounded quantifiers runs in the sandbox. Each of
    // these strings matches (at its end) after some milliseconds of backtracking, under the
    // budget of one check; 600 of them took seconds, with the hub's thread blocked throughout.
    const tool = { inputSchema: { type: 'object', properties: { to: { type: 'array', items: { type: 'string', pattern: '\\S+@\\S+\\.\\S+' } } } } };
    expect(v.checkArgs('bulk', tool, { to: ['bob@example.com'] })).toEqual({ ok: true });
    const to = Array.from({ length: 600 }, () => `${'a@'.repeat(200)} b@c.d`);
    const t0 = performance.now();
    const r = v.checkArgs('bulk', tool, { to });
    expect(performance.now() - t0).toBeLessThan(1_500); // the budget of all of them: 500 ms
    // Refused for the time of all of them; on a loaded machine one check alone may pass its own
    // budget first (that string is long: refused alike, the tool kept).
    expect(r).toMatchObject({ ok: false, kind: 'invalid', reason: expect.stringMatching(/(in all|of 406 characters) .*too costly to check/) });
    // The value is refused, not the tool.
    expect(v.checkArgs('bulk', tool, { to: ['bob@example.com'] })).toEqual({ ok: true });
    expect(v.flagged.has('bulk')).toBe(false);
  });

  it('a short string past the budget only because the sandbox was not run in time does not quarantine the tool; a pattern that backtracks does', () => {
    // No sandboxed check answers within 0 ms, as if the machine were too busy to run the
    // sandbox's thread: the check run again with more time tells a pattern that finishes from
    // one that backtracks. Before, any short string past the budget quarantined its tool until
    // a restart.
    const busy = new SchemaValidator(silentLogger, { patternBudgetMs: 0, patternTotalMs: 60_000 });
    try {
      const lookahead = { inputSchema: { type: 'object', properties: { d: { type: 'string', pattern: '^(?=.*[0-9])[a-z0-9]+$' } } } };
      // (A worker that answers before the main thread even starts its wait of 0 ms, which a
      // loaded machine's scheduler can make happen, lets the value through: fine too.)
      const r = busy.checkArgs('lookahead', lookahead, { d: 'abc1' });
      if (r.ok !== true) expect(r).toMatchObject({ ok: false, kind: 'invalid', reason: expect.stringMatching(/while the hub was busy; try again/) });
      expect(busy.flagged.has('lookahead')).toBe(false);
      const sneaky = { inputSchema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a|aa)*$' } } } };
      const t0 = performance.now();
      expect(busy.checkArgs('sneaky', sneaky, { s: `${'a'.repeat(60)}b` })).toMatchObject({ ok: false, kind: 'unusable', reason: expect.stringMatching(/catastrophic backtracking/) });
      expect(performance.now() - t0).toBeLessThan(5_000);
      expect(busy.flagged.get('sneaky')).toMatch(/catastrophic/);
    } finally {
      busy.close();
    }
  });

  it('checks structuredContent only for successful results with an outputSchema', () => {
    const tool = { outputSchema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } };
    expect(v.checkOutput('o', tool, { structuredContent: { n: 1 } })).toEqual({ ok: true });
    expect(v.checkOutput('o', tool, { structuredContent: { n: 'x' } })).toMatchObject({ ok: false, pointer: '/n' });
    expect(v.checkOutput('o', tool, { content: [] })).toMatchObject({ ok: false, reason: expect.stringMatching(/missing/) });
    expect(v.checkOutput('o', tool, { isError: true, content: [] })).toEqual({ ok: true });
    expect(v.checkOutput('o', {}, { structuredContent: 5 })).toEqual({ ok: true });
  });
});

describe('token buckets', () => {
  it('grant the burst, then refill at the rate, and say how long to wait', () => {
    let now = 0;
    const b = new TokenBuckets(() => now);
    const spec = { burst: 3, perSecond: 2 };
    expect([b.take('k', spec), b.take('k', spec), b.take('k', spec)]).toEqual([0, 0, 0]);
    expect(b.take('k', spec)).toBe(500);
    now += 499;
    expect(b.take('k', spec)).toBeGreaterThan(0);
    now += 2;
    expect(b.take('k', spec)).toBe(0);
    now += 60_000;
    for (let i = 0; i < 3; i++) expect(b.take('k', spec)).toBe(0);
    expect(b.take('k', spec)).toBeGreaterThan(0);
    expect(b.take('other', spec)).toBe(0);
  });

  it('RateLimiter: per principal, then per principal and tool with glob overrides', () => {
    let now = 0;
    const l = new RateLimiter({ perPrincipal: { burst: 10, perSecond: 1 }, perTool: { burst: 3, perSecond: 1 }, tools: { 'fs__*': { burst: 1, perSecond: 0.5 } } }, () => now);
    expect(l.check('alice', 'fs__write')).toEqual({ ok: true });
    expect(l.check('alice', 'fs__write')).toEqual({ ok: false, retryAfterMs: 2000, limit: 'tool' });
    expect(l.check('bob', 'fs__write')).toEqual({ ok: true });
    for (let i = 0; i < 3; i++) expect(l.check('alice', 'db__query').ok).toBe(true);
    expect(l.check('alice', 'db__query')).toMatchObject({ ok: false, limit: 'tool' });
    for (let i = 0; i < 4; i++) l.check('alice');
    expect(l.check('alice')).toMatchObject({ ok: false, limit: 'principal' });
    expect(new RateLimiter({}).enabled).toBe(false);
  });

  it('RateLimiter: a wall clock stepped back (NTP, an operator) does not lock a principal out for the length of the step', async () => {
    const real = Date.now;
    let step = 0;
    const wall = vi.spyOn(Date, 'now').mockImplementation(() => real() + step);
    try {
      const l = new RateLimiter({ perPrincipal: { burst: 1, perSecond: 1000 } });
      expect(l.check('alice')).toEqual({ ok: true });
      step = -3_600_000;
      await new Promise((r) => setTimeout(r, 5)); // a token a millisecond: one is back
      // Measured on the wall clock, the bucket owed an hour of refill: 429 with Retry-After 3600.
      expect(l.check('alice')).toEqual({ ok: true });
    } finally {
      wall.mockRestore();
    }
  });

  it("RateLimiter: a client's over-long tool names are not held as they are (a megabyte each, for as long as the buckets live)", () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const l = new RateLimiter({ perTool: { burst: 1, perSecond: 1 } }, () => 0);
    const long = (i: number) => `${i}:${'n'.repeat(1_000_000)}`;
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 200; i++) expect(l.check('alice', long(i))).toEqual({ ok: true });
    gc();
    // 200 MB when each name was kept as its bucket's key.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(20_000_000);
    // Each such name still has a bucket of its own.
    expect(l.check('alice', long(7))).toMatchObject({ ok: false, limit: 'tool' });
    expect(l.check('alice', long(200))).toEqual({ ok: true });
  });

  it('RateLimiter: each kind of limit alone enables it and applies alone', () => {
    const stopped = () => 0; // no refill between checks
    const one = { burst: 1, perSecond: 1 };
    for (const spec of [{ perPrincipal: one }, { perTool: one }, { tools: { 'a*': one } }]) expect(new RateLimiter(spec).enabled, JSON.stringify(spec)).toBe(true);
    const toolsOnly = new RateLimiter({ tools: { 'a*': one } }, stopped);
    expect(toolsOnly.check('alice', 'a1')).toEqual({ ok: true });
    expect(toolsOnly.check('alice', 'a1')).toEqual({ ok: false, retryAfterMs: 1000, limit: 'tool' });
    for (let i = 0; i < 5; i++) expect(toolsOnly.check('alice', 'b1'), 'no glob and no perTool: no limit').toEqual({ ok: true });
    for (let i = 0; i < 5; i++) expect(toolsOnly.check('alice'), 'no perPrincipal: no limit').toEqual({ ok: true });
    const principalOnly = new RateLimiter({ perPrincipal: one }, stopped);
    expect(principalOnly.check('alice', 'a1')).toEqual({ ok: true });
    expect(principalOnly.check('alice', 'b1')).toEqual({ ok: false, retryAfterMs: 1000, limit: 'principal' });
  });

  it('TokenBuckets: the wait is what the bucket lacks of one token; without refill, for ever', () => {
    let now = 0;
    const b = new TokenBuckets(() => now);
    const spec = { burst: 1, perSecond: 2 };
    expect(b.take('k', spec)).toBe(0);
    expect(b.take('k', spec)).toBe(500);
    now += 200; // 0.4 of a token back
    expect(b.take('k', spec)).toBe(300);
    expect(b.take('none', { burst: 1, perSecond: 0 })).toBe(0);
    expect(b.take('none', { burst: 1, perSecond: 0 })).toBe(Infinity);
  });

  it('TokenBuckets: past 50,000 keys, full buckets are forgotten, and a flood loses its oldest half', () => {
    let now = 0;
    const b = new TokenBuckets(() => now);
    const spec = { burst: 2, perSecond: 1 };
    for (let i = 0; i < 50_000; i++) b.take(`k${i}`, spec);
    expect(b.size).toBe(50_000);
    // Every bucket is one token short: none is full yet, so the sweep drops the oldest half.
    b.take('next', spec);
    expect(b.size).toBe(25_001);
    expect(b.take('k0', spec)).toBe(0); // forgotten: a new, full bucket
    expect(b.take('k49999', spec)).toBe(0); // kept: its second token
    expect(b.take('k49999', spec)).toBeGreaterThan(0);
    // A second later every kept bucket is full again, so the next sweep forgets them all.
    now += 1_000;
    for (let i = 0; b.size < 50_000; i++) b.take(`m${i}`, spec);
    now += 1_000;
    b.take('last', spec);
    expect(b.size).toBe(1);
  });
});

describe('globs and tool scopes', () => {
  it('globs match whole names, escaping everything but * and ?', () => {
    expect(compileGlob('fs__*')('fs__write_file')).toBe(true);
    expect(compileGlob('fs__*')('xfs__write')).toBe(false);
    expect(compileGlob('a.b?')('a.bc')).toBe(true);
    expect(compileGlob('a.b?')('axbc')).toBe(false);
    expect(new GlobTable({ 'a*': 1, '*b': 2 }).matches('ab')).toEqual([1, 2]);
  });

  it('every matching glob adds its scopes', () => {
    const s = new ToolScopes({ 'fs__*': 'files', 'fs__write*': ['files', 'write'], 'db__*': 'db' });
    expect(s.required('fs__write_file')).toEqual(['files', 'write']);
    expect(s.required('fs__read')).toEqual(['files']);
    expect(s.required('echo')).toEqual([]);
    expect(s.all()).toEqual(['files', 'write', 'db']);
    expect(missingScopes(['files'], ['files', 'write'])).toEqual(['write']);
  });

  it('a glob named __proto__ (a tool of a server with prefix "" may be so named) keeps its scope', () => {
    // As the config loader gives it: an own key, from JSON.
    const s = new ToolScopes(JSON.parse('{"__proto__":"admin","constructor":["files"]}') as Record<string, string | string[]>);
    expect(s.required('__proto__')).toEqual(['admin']);
    expect(s.required('constructor')).toEqual(['files']);
    expect(s.all()).toEqual(['admin', 'files']);
  });
});
