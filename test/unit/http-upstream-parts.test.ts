import { describe, expect, it } from 'vitest';
import { getStreamWaitMs, resumeWaitMs } from '../../src/upstream/stream-waits.js';
import { legacySessionHeaders, legacySessionVersion, modernRequestHeaders } from '../../src/upstream/request-headers.js';
import { ParamHeaderIndex } from '../../src/upstream/param-headers.js';
import { refusalText } from '../../src/upstream/http-credentials.js';
import { sessionRefused } from '../../src/upstream/http-answers.js';

describe('resumeWaitMs', () => {
  it("waits what the server's retry asked, else 1 s, longer after resumptions that brought nothing, 30 s at most", () => {
    expect(resumeWaitMs(undefined, 0)).toBe(1000);
    expect(resumeWaitMs(0, 0)).toBe(0);
    expect(resumeWaitMs(0, 1)).toBe(100);
    expect(resumeWaitMs(0, 4)).toBe(800);
    expect(resumeWaitMs(250, 2)).toBe(250);
    expect(resumeWaitMs(0, 20)).toBe(30_000);
    expect(resumeWaitMs(90_000, 0)).toBe(30_000);
  });
});

describe('getStreamWaitMs', () => {
  it('backs off from 1 s when the server named no retry, up to 30 s, and never under a Retry-After', () => {
    expect(getStreamWaitMs(0, undefined, 0)).toBe(1000);
    expect(getStreamWaitMs(3, undefined, 0)).toBe(8000);
    expect(getStreamWaitMs(10, undefined, 0)).toBe(30_000);
    expect(getStreamWaitMs(0, undefined, 5000)).toBe(5000);
    expect(getStreamWaitMs(0, undefined, 120_000)).toBe(30_000);
  });

  it("waits a named retry, but never under 1 s ± 20 %, and draws the jitter only then", () => {
    let draws = 0;
    const random = (): number => (draws++, 0.5);
    expect(getStreamWaitMs(0, 0, 0, random)).toBe(1000);
    expect(getStreamWaitMs(0, 5000, 0, random)).toBe(5000);
    expect(getStreamWaitMs(0, 0, 0, () => 0)).toBe(800);
    expect(getStreamWaitMs(0, 0, 0, () => 1)).toBeCloseTo(1200);
    expect(draws).toBe(2);
    getStreamWaitMs(0, undefined, 0, random);
    expect(draws).toBe(2);
  });
});

describe('request headers', () => {
  it('a modern request names its version and method, its target, and a tools/call its mirrored arguments', () => {
    const idx = new ParamHeaderIndex();
    idx.learn({ tools: [{ name: 'deploy', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } } } }] });
    expect(modernRequestHeaders('tools/list', {}, idx)).toEqual({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' });
    const h = modernRequestHeaders('tools/call', { name: 'deploy', arguments: { region: 'eu' } }, idx);
    expect(h['mcp-name']).toBe('deploy');
    expect(Object.keys(h).filter((k) => k.toLowerCase() === 'mcp-param-region').map((k) => h[k])).toEqual(['eu']);
  });

  it('a legacy session speaks the version initialize answered if the hub speaks it, and names its id if it has one', () => {
    expect(legacySessionVersion('2025-06-18')).toBe('2025-06-18');
    expect(legacySessionVersion('1999-01-01')).toBe('2025-11-25');
    expect(legacySessionVersion(undefined)).toBe('2025-11-25');
    expect(legacySessionHeaders('2025-11-25', 'abc')).toEqual({ 'mcp-protocol-version': '2025-11-25', 'mcp-session-id': 'abc' });
    expect(legacySessionHeaders('2025-11-25', undefined)).toEqual({ 'mcp-protocol-version': '2025-11-25' });
  });
});

describe('refusalText', () => {
  const refused = (status: number, challenge?: string) => ({ status, headers: challenge === undefined ? {} : { 'www-authenticate': challenge } });
  it('tells the operator what to do about a refused credential', () => {
    expect(refusalText({ id: 'a' }, refused(401))).toBe("the upstream refused the hub's credentials");
    // A bearer challenge to a hub that sent no credential, or naming the one it sent refused.
    expect(refusalText({ id: 'a' }, refused(401, 'Bearer realm="x", error="invalid_token"'))).toBe(
      'the server asks for an OAuth bearer token; give the hub a client of its authorization server in servers.a.oauth, or a token in its headers',
    );
    expect(refusalText({ id: 'a', headers: { 'X-Api-Key': 'k' } }, refused(401, 'Bearer error="invalid_token", error_description="key k-123 expired"'))).toBe(
      'the server refused the credential the hub sent (invalid_token: key k-123 expired): check the credential in servers.a.headers (or .credentials)',
    );
    const login = { id: 'a', oauth: { grant: 'authorization_code' } } as Parameters<typeof refusalText>[0];
    expect(refusalText(login, refused(401))).toContain('run `switchyard login a`');
    expect(refusalText(login, refused(403, 'Bearer error="insufficient_scope", scope="read write"'))).toContain("switchyard login a --scope 'read write'");
  });
});

describe('sessionRefused (a 400 to a request that named a session)', () => {
  const error = (message: string, id: unknown = null) => JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32000, message } });
  it.each([
    // The session unknown to the server, or the server not initialized: a new session helps.
    ['SDK v1 examples, POST', error('Bad Request: No valid session ID provided'), true],
    ['id-less', JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' } }), true],
    ['a new SDK v1 transport', error('Bad Request: Server not initialized'), true],
    ['SDK v1 examples, GET (plain text)', 'Invalid or missing session ID', true],
    ['older Python SDK (plain text)', 'Bad Request: No valid session ID provided', true],
    ['expired', error('Session expired, please reinitialize'), true],
    // Not so: the request's own error, a session id the server did not get, another trouble, a page.
    ['an error naming the request', error('Bad Request: No valid session ID provided', 7), false],
    ['a session id required (the server did not see it)', error('Bad Request: Mcp-Session-Id header is required'), false],
    ['a busy session', error('Too many requests for this session'), false],
    ['another id-less error', error('Parse error'), false],
    ['an HTML page', '<html><body>Invalid session</body></html>', false],
    ['a long text', `${'x'.repeat(300)} invalid session`, false],
    ['no body', undefined, false],
    // A batch (a 2025-03-26 server's): the member answering the request (id 7) is read.
    ['a batch holding the id-less refusal, beside a long log message', `[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"${'x'.repeat(300)}"}},${error('Bad Request: No valid session ID provided')}]`, true],
    ['a batch holding an error naming the request', `[${error('Bad Request: No valid session ID provided', 7)}]`, false],
    ['a batch holding no answer', `[{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"invalid session"}}]`, false],
  ] as const)('%s → %s', (_what, body, renew) => {
    expect(sessionRefused(body, 7)).toBe(renew);
  });
});
