/** The pure rules of the upstream edge: era verdicts, envelopes, header encoding, backoff. */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MODERN } from '../../src/protocol/era.js';
import type { Message } from '../../src/protocol/jsonrpc.js';
import { RestartPolicy } from '../../src/upstream/backoff.js';
import { encodeHeaderValue, legacyMeta, mcpNameFor, modernMeta, withMeta } from '../../src/upstream/envelope.js';
import { httpVerdict, refusedAsLegacy, refusedAsModern, stdioVerdict } from '../../src/upstream/era-probe.js';
import { ParamHeaderIndex } from '../../src/upstream/param-headers.js';

const discover = { supportedVersions: [MODERN], capabilities: { tools: {} }, resultType: 'complete', ttlMs: 0, cacheScope: 'public' };
const err = (code: number, data?: unknown): Message => ({ jsonrpc: '2.0', id: 1, error: { code, message: 'x', data } });
const ok = (result: Record<string, unknown>): Message => ({ jsonrpc: '2.0', id: 1, result });

describe('stdio era verdict', () => {
  it.each([
    [{ kind: 'result', result: discover }, 'modern'],
    [{ kind: 'result', result: { ...discover, supportedVersions: ['2027-01-01'] } }, 'unsupported'],
    [{ kind: 'result', result: {} }, 'legacy'],
    [{ kind: 'error', error: { code: -32022, message: 'v', data: { supported: ['2027-01-01'], requested: MODERN } } }, 'unsupported'],
    // Only a legacy version in common: spoken after initialize (digest §1.3).
    [{ kind: 'error', error: { code: -32022, message: 'v', data: { supported: ['2027-01-01', '2025-11-25'], requested: MODERN } } }, 'legacy'],
    [{ kind: 'error', error: { code: -32022, message: 'v', data: { supported: ['2025-06-18'], requested: MODERN } } }, 'legacy'],
    [{ kind: 'result', result: { ...discover, supportedVersions: ['2025-11-25'] } }, 'legacy'],
    [{ kind: 'error', error: { code: -32022, message: 'v', data: { supported: [MODERN] } } }, 'modern-retry'],
    [{ kind: 'error', error: { code: -32022, message: 'v', data: { supported: [] } } }, 'legacy'],
    [{ kind: 'error', error: { code: -32022, message: 'v' } }, 'legacy'],
    [{ kind: 'error', error: { code: -32601, message: 'm' } }, 'legacy'],
    [{ kind: 'error', error: { code: -32602, message: 'm' } }, 'legacy'],
    [{ kind: 'error', error: { code: -32004, message: 'pre-release number' } }, 'legacy'],
    [{ kind: 'timeout' }, 'legacy'],
    [{ kind: 'exit' }, 'legacy'],
  ] as const)('%j → %s', (o, kind) => {
    expect(stdioVerdict(o as Parameters<typeof stdioVerdict>[0]).kind).toBe(kind);
  });

  it('asks for a respawn only when the process died', () => {
    expect(stdioVerdict({ kind: 'exit' })).toMatchObject({ respawn: true });
    expect(stdioVerdict({ kind: 'timeout' })).not.toHaveProperty('respawn');
  });
});

describe('HTTP era verdict', () => {
  it.each([
    [200, [ok(discover)], 'modern'],
    [200, [err(-32601)], 'legacy'],
    [200, [], 'legacy'],
    [200, [err(-32022, { supported: [MODERN] })], 'modern-retry'],
    [400, [err(-32022, { supported: ['2027-01-01'] })], 'unsupported'],
    [400, [err(-32022, { supported: ['2025-11-25', '2025-03-26'] })], 'legacy'],
    [200, [ok({ ...discover, supportedVersions: ['2025-11-25', '2027-01-01'] })], 'legacy'],
    [400, [err(-32020)], 'modern-retry'],
    [400, [err(-32021, { requiredCapabilities: {} })], 'modern-retry'],
    [400, [err(-32000)], 'legacy'],
    [400, [], 'legacy'],
    [404, [err(-32001)], 'legacy'],
    [405, [], 'legacy'],
    [406, [], 'legacy'],
    [401, [err(-32022, { supported: [MODERN] })], 'no-evidence'],
    [403, [], 'no-evidence'],
    [408, [], 'no-evidence'],
    [429, [], 'no-evidence'],
    [500, [], 'no-evidence'],
    [503, [], 'no-evidence'],
    [302, [], 'no-evidence'],
  ] as const)('%i %j → %s', (status, msgs, kind) => {
    expect(httpVerdict(status, msgs as unknown as Message[], 1).kind).toBe(kind);
  });

  // Only the probe's own response is its answer: one naming another request proves nothing.
  const to = (id: unknown, m: Message): Message => ({ ...m, id } as Message);
  it.each([
    ['a DiscoverResult naming another id', 200, [to('sy-9', ok(discover))], 'no-evidence'],
    ['a DiscoverResult with a number id equal to the string one', 200, [to(7, ok(discover))], 'no-evidence'],
    ['a DiscoverResult without an id', 200, [to(undefined, ok(discover))], 'no-evidence'],
    ["another request's -32022 listing the modern version", 200, [to('sy-9', err(-32022, { supported: [MODERN] }))], 'no-evidence'],
    ["another request's DiscoverResult, then the probe's own -32601", 200, [to('sy-9', ok(discover)), to('7', err(-32601))], 'legacy'],
    ["another request's DiscoverResult, then the probe's own", 200, [to('sy-9', ok(discover)), to('7', ok(discover))], 'modern'],
    ['the probe\'s own DiscoverResult', 200, [to('7', ok(discover))], 'modern'],
    ['an id-less -32022 listing the modern version (the POST refused)', 400, [to(null, err(-32022, { supported: [MODERN] }))], 'modern-retry'],
    ["a 400 with another request's -32020: the status still says legacy", 400, [to('sy-9', err(-32020))], 'legacy'],
  ] as const)('%s (HTTP %i) → %s', (_what, status, msgs, kind) => {
    expect(httpVerdict(status, msgs as unknown as Message[], '7').kind).toBe(kind);
  });
});

describe('a modern request refused as no request of that era', () => {
  const body = (id: unknown, error: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id, error });
  const noSession = { code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' };
  it.each([
    // A legacy server refusing it before dispatch: an id-less error, or no JSON-RPC answer.
    ['400, null-id -32000 (SDK v1, stateful)', 400, body(null, noSession), true],
    ['400, id-less -32000', 400, JSON.stringify({ jsonrpc: '2.0', error: noSession }), true],
    ['400, null-id "Unsupported protocol version" (SDK v1, stateless)', 400, body(null, { code: -32000, message: 'Bad Request: Unsupported protocol version: 2026-07-28' }), true],
    ['404, null-id -32001 Session not found', 404, body(null, { code: -32001, message: 'Session not found' }), true],
    ['406, null-id error', 406, body(null, { code: -32000, message: 'Not Acceptable' }), true],
    ['400, empty body', 400, undefined, true],
    ['404, empty body', 404, undefined, true],
    ['405, empty body', 405, undefined, true],
    ['400, a body that is no JSON-RPC', 400, '<html>bad request</html>', true],
    ["400, another request's error", 400, body(99, { code: -32000, message: 'x' }), true],
    ['400, null-id -32022 listing only legacy versions', 400, body(null, { code: -32022, message: 'v', data: { supported: ['2025-11-25'] } }), true],
    // Its answer, whatever the status: relayed as such.
    ['404 + -32601 for the request (a modern "method not found")', 404, body(7, { code: -32601, message: 'Method not found' }), false],
    ['400 + -32602 for the request', 400, body(7, { code: -32602, message: 'bad' }), false],
    ['400 + -32602 for the request, its id as a string', 400, body('7', { code: -32602, message: 'bad' }), false],
    // Modern signals: about the request, not the era.
    ['400, null-id -32020 header mismatch', 400, body(null, { code: -32020, message: 'mismatch' }), false],
    ['400, null-id -32021 missing capability', 400, body(null, { code: -32021, message: 'cap' }), false],
    ['400, null-id -32022 listing 2026-07-28', 400, body(null, { code: -32022, message: 'v', data: { supported: ['2026-07-28'] } }), false],
    ['400, -32022 for the request listing 2026-07-28', 400, body(7, { code: -32022, message: 'v', data: { supported: ['2026-07-28', '2027-03-01'] } }), false],
    // No longer speaking 2026-07-28, whatever id it names (SDK v2 servers echo the request's): refused before dispatch.
    ['400, -32022 for the request listing only a newer version', 400, body(7, { code: -32022, message: 'v', data: { supported: ['2027-03-01'] } }), true],
    ['400, null-id -32022 listing only a newer version', 400, body(null, { code: -32022, message: 'v', data: { supported: ['2027-03-01'] } }), true],
    ['400, -32022 for the request listing only legacy versions', 400, body(7, { code: -32022, message: 'v', data: { supported: ['2025-11-25'] } }), true],
    ['400, -32022 for the request without a supported list', 400, body(7, { code: -32022, message: 'v' }), false],
    // No era evidence.
    ['401', 401, body(null, noSession), false],
    ['403', 403, undefined, false],
    ['408', 408, undefined, false],
    ['413, null-id error', 413, body(null, { code: -32000, message: 'too large' }), false],
    ['429', 429, body(null, noSession), false],
    ['500, null-id error', 500, body(null, noSession), false],
    ['503', 503, undefined, false],
    ['406, empty body', 406, undefined, false],
    ['415, empty body', 415, undefined, false],
    ['200', 200, undefined, false],
    // A batch (a 2025-03-26 server's): its member answering the request is read, as a lone body is.
    ['400, a batch holding the null-id no-session error', 400, `[${body(null, noSession)}]`, true],
    ['400, a batch holding -32602 for the request', 400, `[{"jsonrpc":"2.0","method":"notifications/message","params":{}},${body(7, { code: -32602, message: 'bad' })}]`, false],
    ['400, a batch answering another request only', 400, `[${body(8, { code: -32602, message: 'bad' })}]`, true],
  ] as const)('%s → %s', (_what, status, b, refused) => {
    expect(refusedAsModern(status, b, 7) !== undefined).toBe(refused);
  });

  it('says what the server answered', () => {
    expect(refusedAsModern(400, body(null, noSession), 7)).toBe('HTTP 400 -32000 Bad Request: Mcp-Session-Id header is required');
    expect(refusedAsModern(405, undefined, 7)).toBe('HTTP 405 without an answer to the request');
    expect(refusedAsModern(400, body(7, { code: -32022, message: 'Unsupported protocol version', data: { supported: ['2027-03-01'], requested: '2026-07-28' } }), 7)).toBe(
      'HTTP 400 -32022 Unsupported protocol version (it speaks 2027-03-01)',
    );
  });
});

describe('refusedAsLegacy (a legacy request refused as of a version the server no longer speaks)', () => {
  const body = (id: unknown, error: Record<string, unknown>) => JSON.stringify({ jsonrpc: '2.0', id, error });
  const v = (supported: unknown) => ({ code: -32022, message: 'Unsupported protocol version: 2025-11-25', data: { supported, requested: '2025-11-25' } });
  it.each([
    ['-32022 naming the request, listing only 2026-07-28 (SDK v2, legacy: reject)', 400, body(7, v(['2026-07-28'])), true],
    ['null-id -32022 listing only 2026-07-28', 400, body(null, v(['2026-07-28'])), true],
    ['-32022 listing the session\'s version', 400, body(7, v(['2025-11-25', '2026-07-28'])), false],
    ['-32022 without a supported list', 400, body(7, { code: -32022, message: 'v' }), false],
    ['another error', 400, body(null, { code: -32000, message: 'Bad Request' }), false],
    ['a 5xx', 500, body(7, v(['2026-07-28'])), false],
    ['no body', 400, undefined, false],
    ['a batch (2025-03-26) holding the -32022 naming the request', 400, `[${body(7, v(['2026-07-28']))}]`, true],
    ['a batch holding only another request\'s -32022', 400, `[${body(8, v(['2026-07-28']))}]`, false],
  ] as const)('%s → %s', (_what, status, b, refused) => {
    expect(refusedAsLegacy(status, b, '2025-11-25', 7) !== undefined).toBe(refused);
  });
});

describe('envelopes', () => {
  const clientInfo = { name: 'switchyard', version: '1' };

  it('modern: owned keys always come from the hub, pass-through keys survive', () => {
    const m = modernMeta({
      clientInfo,
      paramsMeta: { traceparent: 'a', 'io.modelcontextprotocol/clientInfo': { name: 'forged' } },
      meta: { 'x.y/z': 1, progressToken: 'forged', 'dev.switchyard/idempotency-key': 'k' },
      progressToken: 'sy-1',
    });
    expect(m).toEqual({
      traceparent: 'a',
      'x.y/z': 1,
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': clientInfo,
      progressToken: 'sy-1',
    });
  });

  it('legacy: no envelope; undefined when nothing remains', () => {
    expect(legacyMeta({ clientInfo, logLevel: 'info', clientCapabilities: { sampling: {} } })).toBeUndefined();
    expect(legacyMeta({ clientInfo, paramsMeta: { progressToken: 1 }, progressToken: 'sy-2' })).toEqual({ progressToken: 'sy-2' });
  });

  it('withMeta copies shallowly and never mutates the caller params', () => {
    const args = { big: [1, 2, 3] };
    const params = { name: 't', arguments: args, _meta: { a: 1 } };
    const out = withMeta(params, undefined);
    expect(out).toEqual({ name: 't', arguments: args });
    expect(out.arguments).toBe(args);
    expect(params._meta).toEqual({ a: 1 });
  });

  it('Mcp-Name per method', () => {
    expect(mcpNameFor('tools/call', { name: 'a.b' })).toBe('a.b');
    expect(mcpNameFor('resources/read', { uri: 'file:///x y' })).toBe('file:///x y');
    expect(mcpNameFor('prompts/get', { name: 'p' })).toBe('p');
    expect(mcpNameFor('tasks/get', { taskId: 't1' })).toBe('t1');
    expect(mcpNameFor('tools/list', {})).toBeUndefined();
    expect(mcpNameFor('tools/call', { name: 3 })).toBeUndefined();
  });
});

describe('header value encoding', () => {
  it.each([
    ['plain', 'plain'],
    ['with space', 'with space'],
    ['café', '=?base64?Y2Fmw6k=?='],
    [' lead', `=?base64?${Buffer.from(' lead').toString('base64')}?=`],
    ['trail\t', `=?base64?${Buffer.from('trail\t').toString('base64')}?=`],
    ['a\nb', `=?base64?${Buffer.from('a\nb').toString('base64')}?=`],
    ['', '=?base64??='],
    ['=?base64?abc?=', `=?base64?${Buffer.from('=?base64?abc?=').toString('base64')}?=`],
  ])('%j → %j', (v, enc) => {
    expect(encodeHeaderValue(v)).toBe(enc);
  });

  it('always yields a legal header value that decodes back', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (s) => {
        const e = encodeHeaderValue(s);
        expect(/^[\t\x20-\x7e]*$/.test(e)).toBe(true);
        const m = /^=\?base64\?(.*)\?=$/.exec(e);
        expect(m ? Buffer.from(m[1], 'base64').toString('utf8') : e).toBe(s.isWellFormed() ? s : Buffer.from(s).toString('utf8'));
      }),
    );
  });
});

describe('x-mcp-header mirroring', () => {
  const idx = new ParamHeaderIndex();
  idx.learn({
    tools: [
      {
        name: 't',
        inputSchema: {
          type: 'object',
          properties: {
            region: { type: 'string', 'x-mcp-header': 'Region' },
            n: { type: 'integer', 'x-mcp-header': 'N' },
            flag: { type: 'boolean', 'x-mcp-header': 'Flag' },
            ratio: { type: 'number', 'x-mcp-header': 'Ratio' },
            bad: { type: 'string', 'x-mcp-header': 'Bad Name' },
            nested: { type: 'object', properties: { deep: { type: 'string', 'x-mcp-header': 'Deep' } } },
            list: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Item' } },
          },
        },
      },
      { name: 'plain', inputSchema: { type: 'object' } },
    ],
  });

  it('adds a header per declared primitive argument that has a value', () => {
    const h: Record<string, string> = {};
    idx.apply({ name: 't', arguments: { region: 'Zürich', n: 3, flag: false, ratio: 0.5, bad: 'x', nested: { deep: 'd' }, list: ['i'] } }, h);
    expect(h).toEqual({
      'mcp-param-region': `=?base64?${Buffer.from('Zürich').toString('base64')}?=`,
      'mcp-param-n': '3',
      'mcp-param-flag': 'false',
      'mcp-param-deep': 'd',
    });
  });

  it('omits absent and null values, and tools without declarations', () => {
    const h: Record<string, string> = {};
    idx.apply({ name: 't', arguments: { region: null } }, h);
    idx.apply({ name: 'plain', arguments: { region: 'x' } }, h);
    idx.apply({ name: 'unknown' }, h);
    expect(h).toEqual({});
  });

  it('forgets declarations a later list no longer has', () => {
    const i2 = new ParamHeaderIndex();
    i2.learn({ tools: [{ name: 'a', inputSchema: { properties: { r: { type: 'string', 'x-mcp-header': 'R' } } } }] });
    i2.learn({ tools: [{ name: 'a', inputSchema: { properties: { r: { type: 'string' } } } }] });
    const h: Record<string, string> = {};
    i2.apply({ name: 'a', arguments: { r: 'x' } }, h);
    expect(h).toEqual({});
  });
});

describe('restart policy', () => {
  it('backs off exponentially with bounded jitter, then fails a crash loop and retries slowly', () => {
    const p = new RestartPolicy({ baseMs: 100, maxMs: 1000, crashLimit: 5, windowMs: 60_000, failedRetryMs: 60_000, jitter: 0 });
    expect([0, 1, 2, 3].map((t) => p.onFailure(t * 1000))).toEqual([
      { delayMs: 100, failed: false },
      { delayMs: 200, failed: false },
      { delayMs: 400, failed: false },
      { delayMs: 800, failed: false },
    ]);
    expect(p.onFailure(4000)).toEqual({ delayMs: 60_000, failed: true });
    expect(p.onFailure(200_000)).toEqual({ delayMs: 60_000, failed: true });
    p.onReady();
    // Old failures fell out of the window: back to the start.
    expect(p.onFailure(400_000)).toEqual({ delayMs: 100, failed: false });
  });

  it('caps the delay and keeps jitter within its band', () => {
    const lo = new RestartPolicy({ baseMs: 1000, maxMs: 2000, crashLimit: 100, jitter: 0.2 }, () => 0);
    const hi = new RestartPolicy({ baseMs: 1000, maxMs: 2000, crashLimit: 100, jitter: 0.2 }, () => 1);
    expect([1, 2, 3].map((t) => lo.onFailure(t).delayMs)).toEqual([800, 1600, 1600]);
    expect([1, 2, 3].map((t) => hi.onFailure(t).delayMs)).toEqual([1200, 2400, 2400]);
  });

  it('a server taken down as hung: its own doubling delay, capped, never `failed`, and no crash toward the limit; served well, it starts over', () => {
    const p = new RestartPolicy({ baseMs: 100, maxMs: 1000, crashLimit: 2, windowMs: 60_000, failedRetryMs: 60_000, jitter: 0 });
    expect([1, 2, 3, 4, 5, 6].map(() => p.onHung())).toEqual([100, 200, 400, 800, 1000, 1000].map((delayMs) => ({ delayMs, failed: false })));
    // Six hangs within the window, yet a crash now is the first of a loop.
    expect(p.onFailure(10)).toEqual({ delayMs: 100, failed: false });
    p.onServedWell();
    expect(p.onHung()).toEqual({ delayMs: 100, failed: false });
  });

  it('forgets failures older than the window', () => {
    const p = new RestartPolicy({ baseMs: 100, crashLimit: 3, windowMs: 1000, jitter: 0 });
    p.onFailure(0);
    p.onFailure(100);
    expect(p.onFailure(2000)).toEqual({ delayMs: 100, failed: false });
  });
});
