/**
 * The status and headers of a 2025-03-26 batch whose every member the edge refused
 * (src/downstream/http-server.ts batchRefusal): the members' status and the longest Retry-After;
 * none when their other headers differ (one challenge cannot ask for every scope).
 */
import { describe, expect, it } from 'vitest';
import { batchRefusal } from '../../src/downstream/http-server.js';

describe('batchRefusal', () => {
  it('keeps the longest Retry-After of rate-limited members', () => {
    const r = batchRefusal([
      { status: 429, headers: { 'retry-after': '3' }, message: 'a' },
      { status: 429, headers: { 'retry-after': '40' }, message: 'b' },
      { status: 429, headers: { 'retry-after': '7' }, message: 'c' },
    ]);
    expect(r).toEqual({ status: 429, headers: { 'retry-after': '40' } });
  });

  it('keeps a challenge every member shares; members asking for different scopes leave the batch a 200', () => {
    const challenge = 'Bearer error="insufficient_scope", scope="tools:a"';
    expect(batchRefusal([
      { status: 403, headers: { 'www-authenticate': challenge }, message: 'a' },
      { status: 403, headers: { 'www-authenticate': challenge }, message: 'b' },
    ])).toEqual({ status: 403, headers: { 'www-authenticate': challenge } });
    expect(batchRefusal([
      { status: 403, headers: { 'www-authenticate': challenge }, message: 'a' },
      { status: 403, headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="tools:b"' }, message: 'b' },
    ])).toBeUndefined();
  });
});
