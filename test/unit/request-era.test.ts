import { describe, expect, it } from 'vitest';
import { classifyEra } from '../../src/downstream/classify.js';
import { eraOfRequest } from '../../src/protocol/request-era.js';

const V = 'io.modelcontextprotocol/protocolVersion';

describe('eraOfRequest', () => {
  // The row of a request refused before the endpoint reads it (rate limit, scopes, a body never
  // read) names the era the endpoint serves it in: classifyEra's, `modern` and `invalid` alike.
  it('agrees with the endpoint classification for every method, claim and header', () => {
    const methods = ['initialize', 'tools/list', 'tools/call', undefined];
    const claims: unknown[] = [undefined, '2026-07-28', '2025-11-25', '2099-01-01', 'latest', 5, null];
    const metas = (claim: unknown): unknown[] => [undefined, 'x', [claim], ...(claim === undefined ? [{}] : [{ [V]: claim }])];
    const headers = [undefined, '2026-07-28', '2025-11-25', '2025-03-26', '2099-01-01', 'junk'];
    let n = 0;
    for (const method of methods)
      for (const claim of claims)
        for (const meta of metas(claim))
          for (const header of headers) {
            const params = meta === undefined ? {} : { _meta: meta };
            const verdict = classifyEra(method, params as Record<string, unknown>, header).era;
            expect(eraOfRequest(method, params, header), JSON.stringify({ method, params, header })).toBe(verdict === 'legacy' ? '2025-11-25' : '2026-07-28');
            n++;
          }
    expect(n).toBeGreaterThan(400);
  });
});
