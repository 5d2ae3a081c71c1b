import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { argsHash, canonicalJson } from '../../src/ledger/canonical.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { MAX_TEXT, nameText, text } from '../../src/ledger/columns.js';
import { redact, redactString } from '../../src/ledger/redact.js';
import { dropConfigSecrets, useConfigSecrets } from '../../src/policy/config-secrets.js';
import { closeAndRemove, begin, end, tempDir } from './ledger-helpers.js';

let t: ReturnType<typeof tempDir>;
let ledger: Ledger | undefined;
// A ledger closed twice, or a folder removed twice, is no harm.
afterEach(() => closeAndRemove(ledger, t));

/** The definition for JSON values: JSON.stringify's text with every object's keys sorted. */
function sortedJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const rec = v as Record<string, unknown>;
    return `{${Object.keys(rec).sort().map((k) => `${JSON.stringify(k)}:${sortedJson(rec[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

describe('canonical JSON and argsHash', () => {
  it('sorts keys recursively and otherwise follows JSON.stringify', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}');
    expect(canonicalJson({ u: undefined, f: () => 1, n: Number.NaN, arr: [undefined], d: new Date(0) })).toBe(
      '{"arr":[null],"d":"1970-01-01T00:00:00.000Z","n":null}',
    );
    expect(canonicalJson(undefined)).toBe('null');
    expect(canonicalJson(10n)).toBe('10');
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(() => canonicalJson(cyclic)).toThrow(/cyclic/);
    // Shared (non-cyclic) references are fine.
    const shared = { x: 1 };
    expect(canonicalJson([shared, shared])).toBe('[{"x":1},{"x":1}]');
    // Already sorted at the top, not below, or inside a toJSON: still sorted throughout.
    expect(canonicalJson({ a: { z: 1, y: 2 }, b: [{ d: 1, c: 2 }] })).toBe('{"a":{"y":2,"z":1},"b":[{"c":2,"d":1}]}');
    expect(canonicalJson({ a: { toJSON: () => ({ z: 1, y: 2 }) } })).toBe('{"a":{"y":2,"z":1}}');
    expect(canonicalJson({ a: 1n, b: [2n] })).toBe('{"a":1,"b":[2]}');
    expect(canonicalJson([1, , 3])).toBe('[1,null,3]');
    // Integer-like keys: JavaScript lists them first, in numeric order; canonical order is by code unit.
    expect(canonicalJson(JSON.parse('{"9":1,"10":2,"a":3}'))).toBe('{"10":2,"9":1,"a":3}');
    expect(canonicalJson({ a: [1, , 3], z: { y: 1, x: 2 } })).toBe('{"a":[1,null,3],"z":{"x":2,"y":1}}');
    // Deeper than the fast path looks: the slow path still sorts.
    let deep: Record<string, unknown> = { b: 1, a: 2 };
    for (let i = 0; i < 40; i++) deep = { k: deep };
    expect(canonicalJson(deep)).toBe('{"k":'.repeat(40) + '{"a":2,"b":1}' + '}'.repeat(40));
  });

  it('argsHash ignores key order and sees every value', () => {
    expect(argsHash({ a: 1, b: [1, 2] })).toBe(argsHash({ b: [1, 2], a: 1 }));
    expect(argsHash({ a: 1, b: [1, 2] })).not.toBe(argsHash({ a: 1, b: [2, 1] }));
    expect(argsHash(undefined)).toBe(argsHash({}));
    expect(argsHash({})).toMatch(/^[0-9a-f]{64}$/);
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const reordered = JSON.parse(JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).reverse()) : x)));
        expect(argsHash(reordered)).toBe(argsHash(v));
        // Canonical JSON is still JSON, with the same value: keys sorted, otherwise JSON.stringify.
        expect(JSON.parse(canonicalJson(v))).toEqual(JSON.parse(JSON.stringify(v) ?? 'null'));
        expect(canonicalJson(v)).toBe(sortedJson(v));
        expect(canonicalJson(reordered)).toBe(canonicalJson(v));
      }),
      { numRuns: 300 },
    );
  });
});

describe('redaction', () => {
  it('blanks bearer tokens in any string and values of secret-looking keys', () => {
    expect(redactString('Authorization: Bearer eyJhbGciOi.x-y_z~+/= and more')).toBe('Authorization: Bearer [redacted] and more');
    expect(redactString('bearer abc')).toBe('Bearer [redacted]');
    // Any scheme of a header written out: the scheme kept, its credentials not.
    expect(redactString(`curl -H "Authorization: Basic ZGVwbG95OnB3" -H 'Proxy-Authorization: Token t0k3n' x`)).toBe(
      `curl -H "Authorization: Basic [redacted]" -H 'Proxy-Authorization: Token [redacted]' x`,
    );
    expect(redactString('authorization=abc123; the Authorization header')).toBe('authorization=[redacted]; the Authorization header');
    const input = {
      query: 'select',
      password: 'hunter2',
      nested: { apiKey: 'k', 'api-key': 'k2', API_KEY: 'k3', Cookie: 'c', list: [{ clientSecret: 's' }, 'Bearer tok123'] },
      accessToken: { deep: 'object' },
      credentials: ['a'],
      pass: 1,
      passage: 'ok?',
    };
    expect(redact(input)).toEqual({
      query: 'select',
      password: '[redacted]',
      nested: { apiKey: '[redacted]', 'api-key': '[redacted]', API_KEY: '[redacted]', Cookie: '[redacted]', list: [{ clientSecret: '[redacted]' }, 'Bearer [redacted]'] },
      accessToken: '[redacted]',
      credentials: '[redacted]',
      pass: '[redacted]',
      passage: 'ok?', // a word of the key, not a part of a word: `pass` is not in `passage`
    });
    expect(input.password).toBe('hunter2'); // a copy, the original is untouched
  });

  // The default matched credential words anywhere in a key, so `max_tokens`, `passage` and
  // `bypass_cache` were hidden from the ledger and from a user confirming a call.
  it('the default pattern matches credential words as words of a key: every credential key it matched before, not max_tokens, passage, bypass_cache', () => {
    const credentials = [
      'password', 'passwd', 'Password', 'PGPASSWORD', 'dbpassword', 'user_password', 'passWord', 'passphrase', 'passPhrase',
      'pass', 'PASS', 'db_pass', 'smtpPass', 'mysql-pass', 'dbpass',
      'token', 'Token', 'access_token', 'accessToken', 'refreshToken', 'id_token', 'idToken', 'ID_TOKEN', 'GITHUB_TOKEN', 'x-auth-token', 'XSRF-TOKEN', 'csrftoken', 'OAuthToken', 'bearerToken', 'token_value', 'tokenValue', 'auth.token',
      'apiKey', 'api-key', 'api_key', 'API_KEY', 'APIKey', 'apikey', 'x-api-key', 'X-Api-Key', 'api.key',
      'secret', 'secrets', 'client_secret', 'clientSecret', 'AWS_SECRET_ACCESS_KEY', 'secretKey', 'webhook-secret',
      'authorization', 'Authorization', 'proxy-authorization',
      'cookie', 'Cookie', 'cookies', 'set-cookie', 'cookieJar',
      'credential', 'credentials', 'aws.credentials',
      'private_key', 'privateKey', 'PRIVATE_KEY', 'private-key',
    ];
    const plain = [
      'max_tokens', 'maxTokens', 'MAX_TOKENS', 'max_tokens_to_sample', 'total_tokens', 'tokens', 'tokenizer',
      'passage', 'passages', 'passthrough', 'passenger', 'bypass_cache', 'bypassCache', 'BYPASS_CACHE', 'bypass', 'compass', 'overpass',
      'key', 'name', 'query', 'public_key_id',
    ];
    const input = Object.fromEntries([...credentials, ...plain].map((k) => [k, 'v']));
    const out = redact(input) as Record<string, unknown>;
    expect(credentials.filter((k) => out[k] !== '[redacted]')).toEqual([]);
    expect(plain.filter((k) => out[k] !== 'v')).toEqual([]);
  });

  it('takes a custom key pattern, and survives cycles and deep nesting', () => {
    expect(redact({ ssn: '1', password: 'p' }, /^ssn$/gi)).toEqual({ ssn: '[redacted]', password: 'p' });
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.me = cyclic;
    expect(redact(cyclic)).toEqual({ a: 1, me: '[cycle]' });
    let deep: unknown = 'Bearer x';
    for (let i = 0; i < 200; i++) deep = [deep];
    expect(JSON.stringify(redact(deep))).toContain('[too deep]');
    const proto = JSON.parse('{"__proto__": {"password": "p", "x": 1}}') as unknown;
    expect(JSON.stringify(redact(proto))).toBe('{"__proto__":{"password":"[redacted]","x":1}}');
  });

  it('keeps every JSON value intact apart from redacted keys', () => {
    const none = /(?!)/; // matches no key at all
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const plain = JSON.parse(JSON.stringify(v).replace(/[Bb]earer/g, 'b')) as unknown;
        expect(JSON.stringify(redact(plain, none))).toBe(JSON.stringify(plain));
      }),
      { numRuns: 300 },
    );
  });

  it('the ledger stores redacted bodies only when storeBodies is on', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true });
    await ledger.record(
      begin({ args: { path: '/x', token: 'secret-token', header: 'Bearer abc.def' } }),
      end({
        outcome: 'rpc_error',
        errorMessage: 'upstream said: invalid Bearer abc.def',
        result: { content: [{ type: 'text', text: 'your api_key is', api_key: 'zzz' }] },
      }),
    );
    const [row] = ledger.query({});
    expect(JSON.parse(row.argsJson!)).toEqual({ path: '/x', token: '[redacted]', header: 'Bearer [redacted]' });
    expect(JSON.parse(row.resultJson!)).toEqual({ content: [{ type: 'text', text: 'your api_key is', api_key: '[redacted]' }] });
    expect(row.errorMessage).toBe('upstream said: invalid Bearer [redacted]');
    const raw = JSON.stringify(row);
    expect(raw).not.toContain('secret-token');
    expect(raw).not.toContain('abc.def');
    expect(raw).not.toContain('zzz');
  });

  it('resource URIs in a row lose their credentials: a URL password, a token of a known shape, a config secret', async () => {
    t = tempDir();
    const owner = {};
    useConfigSecrets(owner, ['Zq8secretTOKENvalue4242']);
    try {
      ledger = Ledger.open({ path: t.db });
      const uris = [
        'mem://notes/1?q=Zq8secretTOKENvalue4242',
        'https://bob:hunter2hunter2@example.com/notes',
        'file:///keys/ghp_0123456789abcdefghijABCDEFGHIJ0123456789.txt',
      ];
      for (const uri of uris) await ledger.record(begin({ method: 'resources/read', hubName: uri, upstreamName: uri }), end());
      const h = ledger.begin(begin({ method: 'resources/read', hubName: uris[0] }));
      await h.finish(end({ upstreamName: uris[1] })); // a late fact
      await ledger.record(begin({ method: 'tools/call', hubName: 'notes__add', upstreamName: 'add' }), end());
      const rows = ledger.query({}).reverse();
      expect(rows.map((r) => [r.hubName, r.upstreamName])).toEqual([
        ['mem://notes/1?q=[redacted:config-secret]', 'mem://notes/1?q=[redacted:config-secret]'],
        ['https://bob:[redacted:url-credentials]@example.com/notes', 'https://bob:[redacted:url-credentials]@example.com/notes'],
        ['file:///keys/[redacted:github-token].txt', 'file:///keys/[redacted:github-token].txt'],
        ['mem://notes/1?q=[redacted:config-secret]', 'https://bob:[redacted:url-credentials]@example.com/notes'],
        ['notes__add', 'add'],
      ]);
      const raw = JSON.stringify(rows);
      for (const secret of ['Zq8secretTOKENvalue4242', 'hunter2hunter2', 'ghp_0123']) expect(raw).not.toContain(secret);
      expect(ledger.verify()).toMatchObject({ ok: true, rows: 5 });
    } finally {
      dropConfigSecrets(owner);
    }
  });

  it('a name is redacted for the config\'s secrets as they are when its row is written, not as when the same name came before', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const uri = 'mem://notes/1?q=Zq8secretTOKENvalue4242';
    const owner = {};
    await ledger.record(begin({ method: 'resources/read', hubName: uri, upstreamName: uri }), end());
    useConfigSecrets(owner, ['Zq8secretTOKENvalue4242']);
    try {
      await ledger.record(begin({ method: 'resources/read', hubName: uri, upstreamName: uri }), end());
    } finally {
      dropConfigSecrets(owner);
    }
    await ledger.record(begin({ method: 'resources/read', hubName: uri, upstreamName: uri }), end());
    const rows = ledger.query({}).reverse();
    const redacted = 'mem://notes/1?q=[redacted:config-secret]';
    expect(rows.map((r) => [r.hubName, r.upstreamName])).toEqual([
      [uri, uri],
      [redacted, redacted],
      [uri, uri],
    ]);
  });

  it('nameText gives a name met again (kept redacted) what it gave the first time, and what redaction gives', () => {
    const byDefinition = (s: string): string | null => text(redactString(s.slice(0, 2 * MAX_TEXT)));
    const owner = {};
    useConfigSecrets(owner, ['Zq8secretTOKENvalue4242']);
    try {
      const name = fc.oneof(
        fc.string({ maxLength: 300 }),
        fc.constantFrom('notes__add', 'Bearer abcdefghijklmnopqrstuvwxyz', 'x?token=Zq8secretTOKENvalue4242', 'ghp_0123456789abcdefghijABCDEFGHIJ0123456789', 'a\ud800b'),
        fc.tuple(fc.string(), fc.constantFrom('Zq8secretTOKENvalue4242', 'https://u:pw12345678@h/')).map(([a, b]) => a + b),
      );
      fc.assert(
        fc.property(name, (s) => {
          const want = byDefinition(s);
          expect(nameText(s)).toBe(want);
          expect(nameText(s)).toBe(want);
        }),
        { numRuns: 400 },
      );
      expect(nameText('x'.repeat(9000))).toBe(byDefinition('x'.repeat(9000)));
      expect(nameText(undefined)).toBeNull();
      expect(nameText(42)).toBe('42');
    } finally {
      dropConfigSecrets(owner);
    }
  });

  it('a tool or prompt name no server has is the client\'s text: a token in it is redacted, as in its error message', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db });
    const gh = 'ghp_0123456789abcdefghijABCDEFGHIJ0123456789';
    const sk = 'sk-proj-abcdefghijklmnopqrstuvwxyz012345';
    await ledger.record(begin({ method: 'tools/call', hubName: gh }), end({ outcome: 'rpc_error', errorCode: -32602, errorMessage: `Unknown tool: ${gh}` }));
    await ledger.record(begin({ method: 'prompts/get', hubName: sk }), end({ outcome: 'rpc_error', errorCode: -32602, errorMessage: `Unknown prompt: ${sk}` }));
    await ledger.record(begin({ method: 'tools/call', hubName: 'notes__add', upstreamName: 'add' }), end());
    const rows = ledger.query({}).reverse();
    expect(rows.map((r) => [r.hubName, r.errorMessage])).toEqual([
      ['[redacted:github-token]', 'Unknown tool: [redacted:github-token]'],
      ['[redacted:api-key]', 'Unknown prompt: [redacted:api-key]'],
      ['notes__add', null],
    ]);
    expect(JSON.stringify(rows)).not.toMatch(/ghp_0123|sk-proj/);
    expect(ledger.verify()).toMatchObject({ ok: true, rows: 3 });
  });

  it('uses the configured pattern (a regex source string) and caps huge bodies', async () => {
    t = tempDir();
    ledger = Ledger.open({ path: t.db, storeBodies: true, redactKeys: '^ssn$', maxBodyBytes: 100 });
    await ledger.record(begin({ args: { SSN: '123', password: 'visible-by-config' } }), end({ result: { big: 'x'.repeat(500) } }));
    const [row] = ledger.query({});
    expect(JSON.parse(row.argsJson!)).toEqual({ SSN: '[redacted]', password: 'visible-by-config' });
    expect(JSON.parse(row.resultJson!)).toEqual({ truncated: true, bytes: 510 });
    expect(() => Ledger.open({ path: t.db, redactKeys: '(' })).toThrow(/not a valid regular expression/);
  });
});
