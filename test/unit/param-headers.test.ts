import { describe, expect, it } from 'vitest';
import { declaredParamHeaders, paramHeaderAnnotationProblem, paramHeaderProblem } from '../../src/protocol/param-headers.js';
import { decodeHeaderValue as decodeParamHeader, encodeHeaderValue, firstHeaderValue } from '../../src/protocol/header-value.js';

const schema = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    count: { type: 'integer', 'x-mcp-header': 'Count' },
    dry: { type: 'boolean', 'x-mcp-header': 'Dry' },
    nested: { type: 'object', properties: { zone: { type: 'string', 'x-mcp-header': 'Zone' } } },
    listed: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } },
    plain: { type: 'string' },
  },
};

function headers(h: Record<string, string>): (name: string) => string | undefined {
  const lower = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
  return (name) => lower[name];
}

describe('decodeHeaderValue', () => {
  it('decodes a strict Base64 sentinel and keeps anything else literal', () => {
    expect(decodeParamHeader('=?base64?SGVsbG8=?=')).toBe('Hello');
    expect(decodeParamHeader('SGVsbG8=')).toBe('SGVsbG8=');
    expect(decodeParamHeader('=?base64?SGVsbG8=')).toBe('=?base64?SGVsbG8=');
    expect(decodeParamHeader('=?base64??=')).toBe('');
  });

  it('takes as a sentinel only a value wrapped in both its ends, with room for both', () => {
    expect(decodeParamHeader('=?base64?=')).toBe('=?base64?='); // the ends overlap: literal
    expect(decodeParamHeader('=?base64?SGk')).toBe('=?base64?SGk');
    expect(decodeParamHeader('SGk?=')).toBe('SGk?=');
  });

  it('encodes what is not plain visible ASCII, and only that', () => {
    for (const plain of ['a\tb', 'a~b', 'x y', '=?base64?x', 'x?=']) expect(encodeHeaderValue(plain), plain).toBe(plain);
    for (const other of ['', ' x', 'x ', 'a\x7fb', 'é', '=?base64?eA==?=']) {
      const e = encodeHeaderValue(other);
      expect(e, other).toMatch(/^=\?base64\?.*\?=$/);
      expect(decodeParamHeader(e), other).toBe(other);
    }
  });

  it('refuses bad padding, foreign characters and bytes that are not UTF-8', () => {
    expect(decodeParamHeader('=?base64?SGVsbG8?=')).toBeNull();
    expect(decodeParamHeader('=?base64?SGVs!!!bG8=?=')).toBeNull();
    expect(decodeParamHeader(`=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`)).toBeNull();
  });
});

describe('firstHeaderValue', () => {
  it('reads a header as node:http hands it over: a string, the first of a list, or nothing', () => {
    expect(firstHeaderValue('a')).toBe('a');
    expect(firstHeaderValue(['a', 'b'])).toBe('a');
    expect(firstHeaderValue([])).toBeUndefined();
    expect(firstHeaderValue(undefined)).toBeUndefined();
  });
});

describe('paramHeaderProblem', () => {
  it('accepts mirrors that match, Base64 or literal, integers numerically', () => {
    const args = { region: 'eu west', count: 7, dry: false, nested: { zone: 'a' }, plain: 'x' };
    const h = headers({
      'Mcp-Param-Region': `=?base64?${Buffer.from('eu west').toString('base64')}?=`,
      'Mcp-Param-Count': '007',
      'Mcp-Param-Dry': 'false',
      'Mcp-Param-Zone': 'a',
    });
    expect(paramHeaderProblem(schema, args, h)).toBeNull();
  });

  it('needs no header for an absent or null argument, ignores one sent for it, and ignores undeclared paths', () => {
    expect(paramHeaderProblem(schema, { region: null, listed: ['x'] }, headers({}))).toBeNull();
    // The header mirrors an argument; an absent or null one has nothing to mirror (the SDK v2 server ignores it too).
    expect(paramHeaderProblem(schema, {}, headers({ 'Mcp-Param-Region': 'eu' }))).toBeNull();
    expect(paramHeaderProblem(schema, { region: null, nested: {} }, headers({ 'Mcp-Param-Region': 'eu', 'Mcp-Param-Zone': 'b' }))).toBeNull();
    expect(paramHeaderProblem({ type: 'object' }, { region: 'x' }, headers({}))).toBeNull();
  });

  it('reports a missing header, a mismatch and a bad sentinel, naming the header as the schema spells it', () => {
    expect(paramHeaderProblem(schema, { region: 'eu' }, headers({}))).toBe('missing Mcp-Param-Region header for arguments.region');
    expect(paramHeaderProblem(schema, { region: 'eu' }, headers({ 'Mcp-Param-Region': 'us' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { count: 7 }, headers({ 'Mcp-Param-Count': '7.0' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { dry: true }, headers({ 'Mcp-Param-Dry': 'TRUE' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { region: 'Hello' }, headers({ 'Mcp-Param-Region': '=?base64?SGVsbG8?=' }))).toMatch(/invalid Base64/);
  });
});

describe('paramHeaderProblem: what a mirror must be', () => {
  it('a boolean mirrors only its own value, as true or false', () => {
    expect(paramHeaderProblem(schema, { dry: true }, headers({ 'Mcp-Param-Dry': 'true' }))).toBeNull();
    expect(paramHeaderProblem(schema, { dry: false }, headers({ 'Mcp-Param-Dry': 'true' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { dry: true }, headers({ 'Mcp-Param-Dry': 'false' }))).toMatch(/does not match/);
    // The body's value is no boolean: mirrored as it is written, for the schema check to refuse the argument.
    expect(paramHeaderProblem(schema, { dry: 'true' }, headers({ 'Mcp-Param-Dry': 'true' }))).toBeNull();
    expect(paramHeaderProblem(schema, { dry: 'yes' }, headers({ 'Mcp-Param-Dry': 'true' }))).toMatch(/does not match/);
  });

  it('an integer mirrors in decimal digits only, compared as a number', () => {
    expect(paramHeaderProblem(schema, { count: -3 }, headers({ 'Mcp-Param-Count': '-3' }))).toBeNull();
    for (const text of ['8', '0x7', '7e0', '+7', '', '7 ']) expect(paramHeaderProblem(schema, { count: 7 }, headers({ 'Mcp-Param-Count': text })), text).toMatch(/does not match/);
    // The body's value is no integer: mirrored as it is written, for the schema check to refuse the argument.
    expect(paramHeaderProblem(schema, { count: '7' }, headers({ 'Mcp-Param-Count': '7' }))).toBeNull();
    expect(paramHeaderProblem(schema, { count: 7.5 }, headers({ 'Mcp-Param-Count': '7.5' }))).toBeNull();
    expect(paramHeaderProblem(schema, { count: '07' }, headers({ 'Mcp-Param-Count': '7' }))).toMatch(/does not match/);
  });

  it('an object or array argument has no header form: no header is looked for, the schema check judges it', () => {
    expect(paramHeaderProblem(schema, { region: { a: 1 }, count: [7] }, headers({}))).toBeNull();
  });

  it('follows only declarations it may: a token name, a primitive type, through properties, not too deep', () => {
    const ignored = {
      type: 'object',
      properties: {
        spaced: { type: 'string', 'x-mcp-header': 'Re gion' },
        trailing: { type: 'string', 'x-mcp-header': 'Zone;' },
        leading: { type: 'string', 'x-mcp-header': '(Zone' },
        number: { type: 'number', 'x-mcp-header': 'Ratio' },
        object: { type: 'object', 'x-mcp-header': 'Obj' },
        notASchema: true,
        nullSchema: null,
      },
    };
    // None is declared, so none is required, and an argument without a mirror is no problem.
    expect(paramHeaderProblem(ignored, { spaced: 'a', trailing: 'b', leading: 'c', number: 0.5, object: {}, notASchema: 1, nullSchema: 2 }, headers({}))).toBeNull();
    // A declaration nine properties down is followed; one ten down is not, however deep the
    // schema goes (the scan is bounded).
    const nested = (n: number, header: string): Record<string, unknown> =>
      n === 0 ? { type: 'string', 'x-mcp-header': header } : { type: 'object', properties: { d: nested(n - 1, header) } };
    const path = (n: number): unknown => (n === 0 ? 'v' : { d: path(n - 1) });
    expect(paramHeaderProblem(nested(2_000, 'Deep'), path(2_000), headers({}))).toBeNull();
    expect(paramHeaderProblem(nested(10, 'Ten'), path(10), headers({}))).toBeNull();
    expect(paramHeaderProblem(nested(9, 'Nine'), path(9), headers({}))).toMatch(/missing Mcp-Param-Nine/);
  });

  it('names a nested argument by its whole path', () => {
    expect(paramHeaderProblem(schema, { nested: { zone: 'a' } }, headers({}))).toBe('missing Mcp-Param-Zone header for arguments.nested.zone');
    expect(paramHeaderProblem(schema, { nested: { zone: 'a' } }, headers({ 'Mcp-Param-Zone': 'b' }))).toBe('Mcp-Param-Zone header does not match arguments.nested.zone');
  });

  it("an argument named as a property of every object is absent when left out, not Object's (no header asked for)", () => {
    const names = ['constructor', 'toString', 'valueOf', 'hasOwnProperty', '__proto__'];
    const props = (prefix: string): Record<string, unknown> => {
      const out: Record<string, unknown> = {};
      // defineProperty: a "__proto__" key is a property here, as JSON.parse makes it.
      for (const n of names) Object.defineProperty(out, n, { value: { type: 'string', 'x-mcp-header': `${prefix}-${n.replace(/_/g, '')}` }, enumerable: true });
      return out;
    };
    const odd = { type: 'object', properties: { ...props('P'), deep: { type: 'object', properties: props('D') } } };
    expect(paramHeaderAnnotationProblem(odd)).toBeNull();
    expect(declaredParamHeaders(odd)).toHaveLength(10);
    expect(paramHeaderProblem(odd, {}, headers({}))).toBeNull();
    expect(paramHeaderProblem(odd, { deep: {} }, headers({}))).toBeNull();
    // Given, each still needs its mirror; a "__proto__" the client sent is its own key.
    expect(paramHeaderProblem(odd, JSON.parse('{"__proto__":"x"}'), headers({}))).toBe('missing Mcp-Param-P-proto header for arguments.__proto__');
    expect(paramHeaderProblem(odd, JSON.parse('{"__proto__":"x"}'), headers({ 'Mcp-Param-P-proto': 'x' }))).toBeNull();
  });

  it('reads the argument only through objects: a string or an array on the path is no value', () => {
    expect(paramHeaderProblem(schema, { nested: 'zone' }, headers({}))).toBeNull();
    expect(paramHeaderProblem(schema, { nested: ['a'] }, headers({}))).toBeNull();
    expect(paramHeaderProblem(schema, null, headers({}))).toBeNull();
    expect(paramHeaderProblem(null, { region: 'eu' }, headers({}))).toBeNull();
  });
});

describe('paramHeaderAnnotationProblem: a tool an HTTP client must drop (digest §3.4)', () => {
  const obj = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });

  it('finds nothing wrong with valid declarations, nested through properties, or with none', () => {
    expect(paramHeaderAnnotationProblem(obj({ region: { type: 'string', 'x-mcp-header': 'Region' }, n: { type: 'integer', 'x-mcp-header': 'N' }, b: { type: 'boolean', 'x-mcp-header': 'B' } }))).toBeNull();
    expect(paramHeaderAnnotationProblem(obj({ a: obj({ zone: { type: 'string', 'x-mcp-header': 'Zone' } }) }))).toBeNull();
    expect(paramHeaderAnnotationProblem(obj({ plain: { type: 'number' } }))).toBeNull();
    expect(paramHeaderAnnotationProblem(undefined)).toBeNull();
    expect(paramHeaderAnnotationProblem({})).toBeNull();
  });

  it.each([
    ['a name that is no token', obj({ r: { type: 'string', 'x-mcp-header': 'Re gion' } }), /not a non-empty token/],
    ['an empty name', obj({ r: { type: 'string', 'x-mcp-header': '' } }), /not a non-empty token/],
    ['a name that is not a string', obj({ r: { type: 'string', 'x-mcp-header': 7 } }), /not a non-empty token/],
    ['a number property', obj({ ratio: { type: 'number', 'x-mcp-header': 'Ratio' } }), /type "number"/],
    ['an object property', obj({ o: { type: 'object', 'x-mcp-header': 'O' } }), /type "object"/],
    ['a property without a type', obj({ o: { 'x-mcp-header': 'O' } }), /type null/],
    ['a name twice, ignoring case', obj({ a: { type: 'string', 'x-mcp-header': 'Zone' }, b: { type: 'string', 'x-mcp-header': 'zone' } }), /declared twice/],
    ['under items', obj({ list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } } }), /properties\/list\/items: "Item" is not on a property reached through properties alone/],
    ['under anyOf', obj({}, { anyOf: [obj({ x: { type: 'string', 'x-mcp-header': 'X' } })] }), /anyOf\/0\/properties\/x/],
    ['under a definition', obj({}, { $defs: { d: { type: 'string', 'x-mcp-header': 'D' } } }), /\$defs\/d/],
    ['under then', obj({}, { if: {}, then: obj({ x: { type: 'string', 'x-mcp-header': 'X' } }) }), /then\/properties\/x/],
    ['on the root', { type: 'string', 'x-mcp-header': 'Root' }, /\(the root\)/],
  ])('%s', (_, schema, why) => {
    expect(paramHeaderAnnotationProblem(schema)).toMatch(why);
  });

  it('agrees with what is mirrored: a schema it passes has every annotation declared; depth is bounded alike', () => {
    const nested = (n: number, header: string): Record<string, unknown> =>
      n === 0 ? { type: 'string', 'x-mcp-header': header } : { type: 'object', properties: { d: nested(n - 1, header) } };
    expect(paramHeaderAnnotationProblem(nested(9, 'Nine'))).toBeNull();
    expect(declaredParamHeaders(nested(9, 'Nine'))).toHaveLength(1);
    expect(paramHeaderAnnotationProblem(nested(10, 'Ten'))).toMatch(/more than 9 properties deep/);
    expect(declaredParamHeaders(nested(10, 'Ten'))).toHaveLength(0);
    // However deep it hides (no recursion to run out of; the schema is built without one too).
    let deep: Record<string, unknown> = { type: 'string', 'x-mcp-header': 'Deep' };
    for (let i = 0; i < 20_000; i++) deep = { type: 'object', properties: { d: deep } };
    expect(paramHeaderAnnotationProblem(deep)).toMatch(/^…\/(properties\/d\/){7}properties\/d: "Deep" is nested more than 9 properties deep$/);
    const valid = obj({ a: { type: 'string', 'x-mcp-header': 'A' }, b: obj({ c: { type: 'boolean', 'x-mcp-header': 'C' } }) });
    expect(paramHeaderAnnotationProblem(valid)).toBeNull();
    expect(declaredParamHeaders(valid).map((d) => d.header).sort()).toEqual(['mcp-param-a', 'mcp-param-c']);
  });
});
