import { describe, expect, it } from 'vitest';
import { paramHeaderProblem } from '../../src/protocol/param-headers.js';
import { decodeHeaderValue as decodeParamHeader } from '../../src/protocol/header-value.js';

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

  it('refuses bad padding, foreign characters and bytes that are not UTF-8', () => {
    expect(decodeParamHeader('=?base64?SGVsbG8?=')).toBeNull();
    expect(decodeParamHeader('=?base64?SGVs!!!bG8=?=')).toBeNull();
    expect(decodeParamHeader(`=?base64?${Buffer.from([0xff, 0xfe]).toString('base64')}?=`)).toBeNull();
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

  it('needs no header for an absent or null argument, and ignores undeclared paths', () => {
    expect(paramHeaderProblem(schema, { region: null, listed: ['x'] }, headers({}))).toBeNull();
    expect(paramHeaderProblem({ type: 'object' }, { region: 'x' }, headers({}))).toBeNull();
  });

  it('reports a missing header, a mismatch, a header without a value and a bad sentinel', () => {
    expect(paramHeaderProblem(schema, { region: 'eu' }, headers({}))).toMatch(/missing Mcp-Param-region/);
    expect(paramHeaderProblem(schema, { region: 'eu' }, headers({ 'Mcp-Param-Region': 'us' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { count: 7 }, headers({ 'Mcp-Param-Count': '7.0' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, { dry: true }, headers({ 'Mcp-Param-Dry': 'TRUE' }))).toMatch(/does not match/);
    expect(paramHeaderProblem(schema, {}, headers({ 'Mcp-Param-Region': 'eu' }))).toMatch(/present but/);
    expect(paramHeaderProblem(schema, { region: 'Hello' }, headers({ 'Mcp-Param-Region': '=?base64?SGVsbG8?=' }))).toMatch(/invalid Base64/);
  });
});
