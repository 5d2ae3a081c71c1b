/**
 * The credential rules: the shared shapes (tool results, upstream errors, ledger rows) and the
 * rules of text the hub writes out (logs, upstream errors, ledger rows) for values assigned to
 * a credential's name and Authorization headers, which tool results must not get.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LOG_SECRET_RULES, redactErrorsIn, redactErrorText, redactLogMessage, redactLogText, redactSecretsIn, redactSecretText, SECRET_RULES, type SecretRule } from '../../src/policy/secret-text.js';

describe('log-only credential assignments', () => {
  it.each([
    ['password=hunter22', 'password=[redacted:credential]'],
    ['DB_PASSWORD: s3cr3t-value', 'DB_PASSWORD: [redacted:credential]'],
    ['{"apiKey": "k-123456", "n": 1}', '{"apiKey": "[redacted:credential]", "n": 1}'],
    ['https://h/cb?access_token=abcdef&x=1', 'https://h/cb?access_token=[redacted:credential]&x=1'],
    ["client_secret='xyz987'", "client_secret='[redacted:credential]'"],
  ])('%s', (line, expected) => {
    expect(redactLogText(line)).toBe(expected);
  });

  it('leaves alone names that only look alike, and short values', () => {
    for (const line of ['tokens: 4096 used', 'max_tokens=512', 'password: ok', 'a secretary=Ann']) expect(redactLogText(line)).toBe(line);
  });

  it('is not applied to what tools return', () => {
    const code = 'function f(token: string, password = input) {}';
    expect(redactSecretText(code)).toBe(code);
    expect(redactLogText(code)).not.toBe(code);
  });

  it('still applies the shared shapes', () => {
    expect(redactLogText('using ghp_' + 'a'.repeat(36))).toBe('using [redacted:github-token]');
  });
});

describe('upstream error text (message and data)', () => {
  it('gets the rules of log text: assignments and Authorization headers, whatever the scheme', () => {
    expect(redactErrorText('failed: password=only-upstream-knows; retry')).toBe('failed: password=[redacted:credential]; retry');
    expect(redactErrorText('sent Authorization: Token short9tok')).toBe('sent Authorization: Token [redacted:authorization]');
    expect(redactErrorText('sent Authorization: Bearer shorttok')).toBe('sent Authorization: Bearer [redacted:authorization]');
    expect(redactErrorText('{"proxy-authorization":"Basic c3ZjOnB3"}')).toBe('{"proxy-authorization":"Basic [redacted:basic-credentials]"}');
    // A token a shape rule marked is not marked again, nor its scheme taken for the credential.
    expect(redactErrorText('Authorization: Bearer ' + 'x'.repeat(20))).toBe('Authorization: Bearer [redacted:bearer-token]');
    expect(redactErrorText('GET https://a.blob.core.windows.net/c/b?sv=2022&sig=AbC%2Bd3%3D&sp=r')).toBe('GET https://a.blob.core.windows.net/c/b?sv=2022&sig=[redacted:credential]&sp=r');
    expect(redactErrorText('https://s.example/o?X-Goog-Signature=0a1b2c3d&x=1')).toBe('https://s.example/o?X-Goog-Signature=[redacted:credential]&x=1');
    expect(redactErrorText('rejected Bearer abc123def, try again')).toBe('rejected Bearer [redacted:bearer-token], try again');
    for (const ok of ['authorization header missing', 'tokens: 4096 used', 'Method not found', 'design=flat', 'signal=TERM', 'Bearer authentication failed', 'Bearer token1']) expect(redactErrorText(ok)).toBe(ok);
    // An OAuth error code followed by its description (a hub in front of another) names no credential.
    for (const ok of ['invalid_token: unknown API key', 'expired_token: ask again']) expect(redactErrorText(ok)).toBe(ok);
    expect(redactErrorText('my_token: abc123secret')).toBe('my_token: [redacted:credential]');
  });

  it("blanks a string under a credential's key in data, and leaves other values and keys", () => {
    const data = { password: 'p', request: { headers: { Authorization: 'Basic x', 'x-api-key': 'k' } }, max_tokens: '512', tokenCount: 3, attempt: 2 };
    expect(redactErrorsIn(data)).toEqual({
      password: '[redacted:credential]',
      request: { headers: { Authorization: '[redacted:credential]', 'x-api-key': '[redacted:credential]' } },
      max_tokens: '512',
      tokenCount: 3,
      attempt: 2,
    });
    const clean = { message: 'nope', list: ['a'] };
    expect(redactErrorsIn(clean)).toBe(clean);
  });

  it('tool results keep the shape rules only', () => {
    expect(redactSecretsIn({ password: 'p', text: 'password=hunter22' })).toEqual({ password: 'p', text: 'password=hunter22' });
  });
});

describe('redactSecretsIn (tool results)', () => {
  const KEY = 'AKIA' + 'ABCDEFGHIJKLMNOP';
  /** `inner` wrapped n times, in arrays or in objects ({ k: … }). */
  const nest = (n: number, inner: unknown, wrap: (v: unknown) => unknown = (v) => [v]): unknown => (n === 0 ? inner : wrap(nest(n - 1, inner, wrap)));
  const inObject = (v: unknown): unknown => ({ k: v });
  const innermost = (v: unknown): unknown => (Array.isArray(v) ? innermost(v[0]) : typeof v === 'object' && v !== null ? innermost((v as { k: unknown }).k) : v);

  it('copies only the path to what it redacts, and returns a clean value itself', () => {
    const clean = { content: [{ type: 'text', text: 'nothing here' }], n: 1, none: null, yes: true, list: [null, 2] };
    expect(redactSecretsIn(clean)).toBe(clean);
    const sibling = { type: 'text', text: 'fine' };
    const v = { content: [sibling, { type: 'text', text: `key ${KEY}` }], meta: { a: 1 } };
    const out = redactSecretsIn(v) as typeof v;
    expect(out.content[1]!.text).toBe('key [redacted:aws-access-key]');
    expect(out.content[0]).toBe(sibling);
    expect(out.meta).toBe(v.meta);
    expect(v.content[1]!.text).toBe(`key ${KEY}`); // the input is left as it was
  });

  it('leaves binary payloads and request state alone when they are strings, and walks them otherwise', () => {
    for (const k of ['data', 'blob', 'requestState']) {
      const binary = { [k]: KEY };
      expect(redactSecretsIn(binary), k).toBe(binary);
      expect(redactSecretsIn({ [k]: { text: KEY } }), k).toEqual({ [k]: { text: '[redacted:aws-access-key]' } });
    }
    expect(redactSecretsIn({ text: KEY })).toEqual({ text: '[redacted:aws-access-key]' });
  });

  it('goes 33 levels deep and no further (bounded work on a hostile result)', () => {
    expect(innermost(redactSecretsIn(nest(33, KEY)))).toBe('[redacted:aws-access-key]');
    expect(innermost(redactSecretsIn(nest(34, KEY)))).toBe(KEY);
    expect(innermost(redactSecretsIn(nest(33, KEY, inObject)))).toBe('[redacted:aws-access-key]');
    expect(innermost(redactSecretsIn(nest(34, KEY, inObject)))).toBe(KEY);
    const deep = nest(5_000, KEY);
    expect(redactSecretsIn(deep)).toBe(deep);
  });

  it('redacts the first 10,000 strings and passes the rest on as they are (bounded work)', () => {
    const many = Array.from({ length: 10_001 }, () => KEY);
    const out = redactSecretsIn(many) as string[];
    expect(out.slice(0, 10_000).every((s) => s === '[redacted:aws-access-key]')).toBe(true);
    expect(out[10_000]).toBe(KEY);
  });

  it("an upstream's log line: no credential left in its data past the walk's depth or string budget, nor in a key", () => {
    const clean = { level: 'info', data: { a: ['b', { c: 1 }] } };
    expect(redactLogMessage(clean)).toBe(clean);
    expect(redactLogMessage({ level: 'info', data: { k: KEY } })).toEqual({ level: 'info', data: { k: '[redacted:aws-access-key]' } });
    const many = [...Array.from({ length: 10_000 }, () => 'x'), KEY];
    for (const data of [nest(40, KEY), nest(40, KEY, inObject), many, { [KEY]: true }]) {
      const out = JSON.stringify(redactLogMessage({ level: 'debug', data }));
      expect(out).not.toContain(KEY);
      expect(out).toContain('[redacted:aws-access-key]');
    }
  });
});

/**
 * The rules that could rescan a run from every start within it are stated differently (a
 * lookbehind, or regions looked into in code). They must find what the expressions they
 * replace found, and in time linear in the text: it comes from upstreams, large and hostile.
 */
/**
 * The url-credentials rule in plain code: at each "://" whose run of scheme characters
 * ([A-Za-z0-9+.-]) right before it is not empty, a user ([^/\s:@]+), ":" and a password
 * ([^@\s/]+) followed by "@": the password is redacted. Matches do not overlap, left to right.
 */
function urlCredentials(s: string): string {
  const scheme = (c: string | undefined) => c !== undefined && /[A-Za-z0-9+.-]/.test(c);
  const runEnd = (i: number, ok: (c: string) => boolean) => {
    while (i < s.length && ok(s[i]!)) i++;
    return i;
  };
  let out = '';
  let copied = 0;
  for (let p = 0; p < s.length; p++) {
    if (!scheme(s[p]) || scheme(s[p - 1])) continue;
    const r = runEnd(p, (c) => scheme(c));
    if (!s.startsWith('://', r)) continue;
    const ue = runEnd(r + 3, (c) => !/[/\s:@]/.test(c));
    if (ue === r + 3 || s[ue] !== ':') continue;
    const pe = runEnd(ue + 1, (c) => !/[@\s/]/.test(c));
    if (pe === ue + 1 || s[pe] !== '@') continue;
    out += s.slice(copied, ue + 1) + '[redacted:url-credentials]';
    copied = pe;
    p = pe - 1;
  }
  return out + s.slice(copied);
}

describe('rules in linear time', () => {
  const rule = (kind: string, rules: readonly SecretRule[] = LOG_SECRET_RULES) => [rules.find((r) => r.kind === kind)!];
  const oracle = (re: RegExp, kind: string, keep?: number) => (s: string) => s.replace(re, (...m: string[]) => (keep ? m[keep] : '') + `[redacted:${kind}]`);
  const textOf = (...tokens: string[]) => fc.array(fc.constantFrom(...tokens), { maxLength: 40 }).map((a) => a.join(''));

  it.each([
    {
      kind: 'jwt',
      old: oracle(/\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}/g, 'jwt'),
      text: textOf('eyJ', 'eyJhbGciOi', 'abcdefgh', '-', '.', ' ', '_', 'x'),
    },
    {
      kind: 'private-key',
      old: oracle(/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----/g, 'private-key'),
      text: textOf('-----BEGIN PRIVATE KEY-----', '-----END PRIVATE KEY-----', '-----BEGIN RSA PRIVATE KEY-----', '-----END EC PRIVATE KEY-----', '-----BEGIN KEY-----', 'MII', '\n', ' '),
    },
    {
      // Not the old expression but the rule written out in code (urlCredentials below): the old
      // one missed a scheme after "_", and the first linear one a scheme after "-", "+" or ".".
      kind: 'url-credentials',
      old: urlCredentials,
      text: textOf('https', 'a', 'Z', '1', '://', ':', '@', '/', ' ', '+', '.', '-', '_', 'user', 'pw'),
    },
    {
      kind: 'credential',
      old: oracle(/(\b[A-Za-z0-9_.-]*(?:password|passwd|pwd|passphrase|secret|api[_-]?key|apikey|token|credentials?)\b["']?\s*[:=]\s*["']?)[^\s"',;&]{3,}/gi, 'credential', 1),
      text: textOf('password', 'token', 'DB_', 'api-key', '=', ':', ' ', '.', '-', '_', 'a', '"', 'x1y2'),
    },
  ])('$kind finds what its old expression found', ({ kind, old, text }) => {
    fc.assert(
      fc.property(text, (s) => {
        expect(redactSecretText(s, rule(kind))).toBe(old(s));
      }),
      { numRuns: 3_000 },
    );
  });

  it('a scheme after "_" is now read too', () => {
    expect(redactSecretText('x_https://me:pw@host')).toBe('x_https://me:[redacted:url-credentials]@host');
  });

  it('a scheme after "-", "+", "." or a digit is read too (fast-check found "-https://https:https@" missed)', () => {
    for (const before of ['-', '+', '.', '1', '--', 'a-', '1.2-'])
      expect(redactSecretText(`${before}https://me:pw@host`)).toBe(`${before}https://me:[redacted:url-credentials]@host`);
    expect(redactSecretText('-https://https:https@')).toBe('-https://https:[redacted:url-credentials]@');
  });

  it.each([
    ['jwt', 'eyJaaaaaaaaa-'.repeat(20_000)],
    ['private-key', '-----BEGIN PRIVATE KEY-----\n'.repeat(75_000)],
    // With "@" and "://" in it, or the rule's hint and gate pass it over unread.
    ['url-credentials', 'a.'.repeat(100_000) + '@ ://'],
    ['url-credentials', '-a'.repeat(100_000) + '@ ://'],
    ['credential', 'a-'.repeat(60_000)],
  ])('%s over its worst text, at once', (kind, hostile) => {
    // The old expressions took 0.04–2.4 s over 50–110 KB of these, growing with the square:
    // 10 s or more at these sizes. Linear rules take milliseconds.
    const before = performance.now();
    redactSecretText(hostile, rule(kind));
    expect(performance.now() - before).toBeLessThan(2_000);
  });
});

describe('the gate in front of the rules', () => {
  // The same rules without their gates: every rule is tried on every text.
  const ungated = (rules: readonly SecretRule[]) => rules.map(({ gate: _gate, ...r }) => r);
  const fragments = [
    '-----BEGIN PRIVATE KEY-----', '-----END PRIVATE KEY-----', 'AKIA', 'ASIA', 'aws_secret_access_key', 'AWS_SECRET_ACCESS_KEY', '=', ': ',
    'ghp_', 'gho_', 'github_pat_', 'xoxb-', 'sk_live_', 'rk_test_', 'sk-', 'sk-ant-', 'AIza', 'eyJ', 'eyJhbGciOi', '.', 'Bearer ', 'bearer\t',
    'https', '://', 'me:pw', '@', '/', ' ', '-', '_', 'A1B2C3D4E5F6G7H8', 'abcdefghij', '0123456789',
  ];
  const text = fc.array(fc.constantFrom(...fragments), { maxLength: 30 }).map((a) => a.join(''));

  it('changes nothing that the rules find', () => {
    for (const rules of [SECRET_RULES, LOG_SECRET_RULES]) {
      const all = ungated(rules);
      fc.assert(
        fc.property(text, (s) => {
          expect(redactSecretText(s, rules)).toBe(redactSecretText(s, all));
        }),
        { numRuns: 5_000 },
      );
    }
  });

  it("each rule's gate is in every match of its expression", () => {
    for (const r of SECRET_RULES) {
      const gate = new RegExp(r.gate!, 'i');
      fc.assert(
        fc.property(text, (s) => {
          for (const m of s.matchAll(new RegExp(r.re.source, r.re.flags))) expect(m[0]).toMatch(gate);
        }),
        { numRuns: 1_000 },
      );
    }
  });

  it('passes over the leading gated rules together when the text holds no gate, and runs the rest', () => {
    const rules: SecretRule[] = [
      { kind: 'a', re: /foo/g, gate: 'bar' },
      { kind: 'b', re: /baz/g, gate: 'qux' },
      { kind: 'c', re: /foo/g },
    ];
    // "foo" holds neither gate: rule a is passed over (a gate only ever stands for its rule's
    // matches; this one is deliberately wrong, to see it work), rule c still runs.
    expect(redactSecretText('foo', rules)).toBe('[redacted:c]');
    expect(redactSecretText('foo bar', rules)).toBe('[redacted:a] bar');
    expect(redactSecretText('foo qux', rules)).toBe('[redacted:a] qux');
  });
});

describe('a Basic credential with no Authorization: before it', () => {
  const pair = Buffer.from('deploy:s3cret-basic-pw').toString('base64');
  it('is redacted wherever it stands, when it decodes to user:password', () => {
    expect(redactSecretText(`-H "X-Upstream-Auth: Basic ${pair}" sent`)).toBe('-H "X-Upstream-Auth: Basic [redacted:basic-credentials]" sent');
    expect(redactSecretText(`basic\t${Buffer.from('u:p??>').toString('base64url')}.`)).toBe('basic\t[redacted:basic-credentials].');
    expect(redactSecretText(`Basic Basic ${pair}`)).toBe('Basic Basic [redacted:basic-credentials]');
  });
  it('leaves the English word alone, and base64 that is no user:password pair', () => {
    for (const t of ['Basic auth is on', 'basic setup', `Basic ${Buffer.from('no colon here').toString('base64')}`, 'Basic dGVzdA', `Basic ${'A'.repeat(2000)}`]) expect(redactSecretText(t)).toBe(t);
  });
});
