/**
 * The config's own secret values (src/config/secret-values.ts) and their redaction
 * (src/policy/config-secrets.ts): an upstream that echoes the token it was given, bare, has no
 * shape the credential rules know, but the hub knows the value, and replaces it on every
 * error and log path; tool results (the redact-secrets plugin's shape rules) are left alone.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseConfig } from '../../src/config/load.js';
import { configSecretValues } from '../../src/config/secret-values.js';
import { redactString } from '../../src/ledger/redact.js';
import { RpcError } from '../../src/protocol/errors.js';
import { errorResponse } from '../../src/protocol/jsonrpc.js';
import {
  CONFIG_SECRET_MARK,
  configSecretCount,
  dropConfigSecrets,
  MIN_SECRET_LENGTH,
  redactConfigSecrets,
  redactConfigSecretsInJson,
  secretForms,
  useConfigSecrets,
} from '../../src/policy/config-secrets.js';
import { redactErrorsIn, redactErrorText, redactLogText, redactSecretsIn, redactSecretText } from '../../src/policy/secret-text.js';
import { upstreamError } from '../../src/upstream/upstream-error.js';
import { unauthorizedAdvice } from '../../src/upstream/http-answers.js';

const M = CONFIG_SECRET_MARK;
const owners: object[] = [];
function use(values: string[], owner: object = {}): object {
  owners.push(owner);
  useConfigSecrets(owner, values);
  return owner;
}
afterEach(() => {
  for (const o of owners.splice(0)) dropConfigSecrets(o);
});

describe('the secret values of a config', () => {
  it('are what ${env:…} brought into a place where a secret sits, and none of the literal text around it', () => {
    const env = { TOKEN: 'plainTokenValue42', HDR: 'header-env-value-1', CRED: 'cred-env-value-1', PW: 'url-env-pass-1', Q: 'url-env-query-1', SK: `${'r'.repeat(43)}=`, PLUGIN_KEY: 'plugin-api-key-1', SHORT: 'abc' };
    const c = parseConfig(
      {
        servers: {
          s: { command: 'node', env: { API_TOKEN: 'x-${env:TOKEN}-y', SHORT_SECRET: '${env:SHORT}' } },
          h: {
            url: 'https://user:pw-${env:PW}@api.example/mcp?access_token=tok-${env:Q}',
            headers: { 'X-Tenant': '${env:HDR}' },
            credentials: { alice: { headers: { 'X-Whatever': 'pre-${env:CRED}' } } },
          },
        },
        policy: { requestStateKey: '${env:SK}' },
        plugins: { options: { mine: { apiKey: '${env:PLUGIN_KEY}' } } },
      },
      undefined,
      env,
    );
    const values = configSecretValues(c);
    expect(values).toEqual(expect.arrayContaining(['plainTokenValue42', 'x-plainTokenValue42-y', 'header-env-value-1', 'cred-env-value-1', 'url-env-pass-1', 'url-env-query-1', `${'r'.repeat(43)}=`, 'plugin-api-key-1', 'abc']));
    expect(values).not.toContain('pre-');
  });

  it("include a server's oauth client secret and private key, literal or brought in by ${env:…}, and not its client id", () => {
    const c = parseConfig(
      {
        servers: {
          a: { url: 'https://a.example/mcp', oauth: { clientId: 'client-id-a', clientSecret: 'pre-${env:CS}' } },
          b: { url: 'https://b.example/mcp', oauth: { clientId: 'client-id-b', privateKey: 'literal-private-key-pem' } },
        },
      },
      undefined,
      { CS: 'oauth-env-secret-1' },
    );
    const values = configSecretValues(c);
    expect(values).toEqual(expect.arrayContaining(['oauth-env-secret-1', 'pre-oauth-env-secret-1', 'literal-private-key-pem']));
    expect(values).not.toContain('client-id-a');
  });

  it('leave out interpolated values where no secret sits: args, a url host or path, cwd, env under ordinary names, listener, ledger', () => {
    const env = {
      HOST: '127.0.0.10',
      HOME: '/home/operator',
      BIN: '/opt/servers/bin',
      UPSTREAM: 'upstream.internal.example:8080',
      NODE_ENV: 'production',
      REGION: 'eu-central-1a',
      ARG: 'argument-value-1',
      PLUGIN_DIR: '/srv/plugins-dir',
    };
    const c = parseConfig(
      {
        listen: { host: '${env:HOST}' },
        ledger: { path: '${env:HOME}/ledger.db' },
        servers: {
          s: {
            command: '${env:BIN}/server',
            cwd: '${env:HOME}/work',
            args: ['--profile', '${env:ARG}', '${env:HOME}/proj'],
            env: { HOME: '${env:HOME}', NODE_ENV: '${env:NODE_ENV}', REGION: '${env:REGION}' },
          },
          h: { url: 'http://${env:UPSTREAM}/mcp/${env:REGION}' },
        },
        plugins: { options: { mine: { folder: '${env:PLUGIN_DIR}' } } },
      },
      undefined,
      env,
    );
    const values = configSecretValues(c);
    for (const v of Object.values(env)) expect(values, v).not.toContain(v);
  });

  it("include what a secret flag takes in args, and URL passwords and secret query values in any arg or env value, and no other arg", () => {
    const c = parseConfig(
      {
        servers: {
          s: {
            command: 'node',
            args: ['--api-key', 'arg-api-key-1', '--github-token=arg-gh-token-1', '--client-secret', '${env:CS}', '--password=pre-${env:PW}', '--db', 'postgres://app:arg-db-pass-1@db/app', '--keyfile', '/home/op/keyfile.pem', '--tokenizer', 'gpt2-tokenizer', '--passthrough', '/srv/data/dir', '--profile', 'production-eu'],
            env: { DATABASE_URL: 'postgres://app:env-db-pass-1@db/app', UPSTREAM: 'https://api.example/v1?api_key=env-query-key-1&region=eu-central-9', OWNER_URL: 'postgres://postgres@db/app' },
          },
        },
      },
      undefined,
      { CS: 'env-client-secret-1', PW: 'env-password-1' },
    );
    const values = configSecretValues(c);
    for (const v of ['arg-api-key-1', 'arg-gh-token-1', 'env-client-secret-1', 'pre-env-password-1', 'env-password-1', 'arg-db-pass-1', 'env-db-pass-1', 'env-query-key-1']) expect(values, v).toContain(v);
    for (const v of ['/home/op/keyfile.pem', 'gpt2-tokenizer', '/srv/data/dir', 'production-eu', 'eu-central-9', 'postgres', '--db']) expect(values, v).not.toContain(v);
  });

  it('include literal credentials: named headers and env, credentials, url user info and named query values, requestStateKey', () => {
    const c = parseConfig(
      {
        servers: {
          s: { command: 'node', env: { GITHUB_TOKEN: 'literal-gh-value', NODE_ENV: 'production', DB_PASSWORD: 'literal-db-pass' } },
          h: {
            url: 'https://deploy:url%40Pass-99@api.example/mcp?api_key=query-secret-1&region=eu-west-123',
            headers: { Authorization: 'Bearer literal-bearer-tok', 'X-Client-Name': 'switchyard-client', 'X-Api-Key': 'literal-x-api-key' },
            credentials: { alice: { headers: { Authorization: 'Basic YWxpY2U6c2VjcmV0MQ==', 'X-Tenant': 'alice-tenant-id' } } },
          },
          t: { url: 'https://bare-token-in-user@api.example/mcp' },
        },
        policy: { requestStateKey: 'a'.repeat(64) },
        plugins: { options: { quota: { apiKey: 'literal-plugin-key', nested: { clientSecret: ['literal-plugin-secret'] }, label: 'plugin-label-text' } }, paths: [{ path: 'p.mjs', options: { token: 'literal-path-token' } }] },
      },
      undefined,
      {},
    );
    const values = configSecretValues(c);
    for (const v of [
      'literal-gh-value',
      'literal-db-pass',
      'url@Pass-99',
      'query-secret-1',
      'Bearer literal-bearer-tok',
      'literal-bearer-tok',
      'literal-plugin-key',
      'literal-plugin-secret',
      'literal-path-token',
      'literal-x-api-key',
      'YWxpY2U6c2VjcmV0MQ==',
      'alice-tenant-id',
      'bare-token-in-user',
      'a'.repeat(64),
    ])
      expect(values, v).toContain(v);
    // Names that do not say "credential" are not secrets when written literally.
    for (const v of ['production', 'switchyard-client', 'eu-west-123', 'deploy', 'plugin-label-text', 'p.mjs']) expect(values, v).not.toContain(v);
  });
});

describe('redaction of the registered values', () => {
  it('replaces each exact value, longest first, also URL-encoded; text without them is the same string', () => {
    use(['plainTokenValue42', 'plainTokenValue42-and-more', 'with space/and&amp']);
    expect(redactConfigSecrets('auth failed for plainTokenValue42, again plainTokenValue42')).toBe(`auth failed for ${M}, again ${M}`);
    expect(redactConfigSecrets('x plainTokenValue42-and-more y')).toBe(`x ${M} y`);
    expect(redactConfigSecrets('GET /?k=with%20space%2Fand%26amp')).toBe(`GET /?k=${M}`);
    const clean = 'nothing to see here';
    expect(redactConfigSecrets(clean)).toBe(clean);
  });

  it(`leaves values shorter than ${MIN_SECRET_LENGTH} characters alone: they would redact ordinary words`, () => {
    use(['abc', 'seven77', 'eight888']);
    expect(configSecretCount()).toBe(1);
    expect(redactConfigSecrets('abc seven77 eight888')).toBe(`abc seven77 ${M}`);
  });

  it('finds a value as a JSON text holds it (escaped), and the text stays JSON', () => {
    use(['quote"and\\back-slash']);
    const line = JSON.stringify({ msg: 'child stderr', stderr: 'said quote"and\\back-slash' });
    const out = redactConfigSecretsInJson(line);
    expect(JSON.parse(out)).toEqual({ msg: 'child stderr', stderr: `said ${M}` });
  });

  it('leaves purely numeric values alone: they would blank the digits of timestamps and ids', () => {
    use(['17332123', '1733212345678', '98765432.5']);
    expect(configSecretCount()).toBe(0);
    const line = '{"level":30,"time":1733212345678,"pid":17332123,"msg":"id 98765432.5"}\n';
    expect(redactConfigSecretsInJson(line)).toBe(line);
    expect(redactConfigSecrets('took 1733212345678 ms')).toBe('took 1733212345678 ms');
  });

  it('replaces inside JSON string tokens only, never in numbers or after the backslash of an escape', () => {
    use(['12345678,9', 'nSecretValue1']);
    const line = '{"ids":[12345678,9],"msg":"ids 12345678,9","said":"a\\nSecretValue1 b nSecretValue1"}\n';
    const out = redactConfigSecretsInJson(line);
    expect(out.endsWith('\n')).toBe(true);
    // "\nSecretValue1" in the line is a newline then "SecretValue1": not the value.
    expect(JSON.parse(out)).toEqual({ ids: [12345678, 9], msg: `ids ${M}`, said: `a\nSecretValue1 b ${M}` });
    // An escaped quote does not end the string; text after the last string is kept.
    const quoted = JSON.stringify({ a: 'x\\"y nSecretValue1', n: 12345678.9, t: true }) + '\n';
    expect(JSON.parse(redactConfigSecretsInJson(quoted))).toEqual({ a: `x\\"y ${M}`, n: 12345678.9, t: true });
  });

  it('finds a value URL-encoded in a JSON text too', () => {
    use(['with space/and&amp', 'quote"and/slash']);
    const line = JSON.stringify({ msg: 'upstream said', url: 'GET /?k=with%20space%2Fand%26amp&q=quote%22and%2Fslash' });
    expect(JSON.parse(redactConfigSecretsInJson(line))).toEqual({ msg: 'upstream said', url: `GET /?k=${M}&q=${M}` });
  });

  it('finds a value base64-encoded at any position of a longer base64 text (a Basic authorization echoed), form-encoded, and JSON-escaped in plain text', () => {
    use(['basic pass~word!9', 'quote"in-secret']);
    for (const prefix of ['', 'a', 'al', 'alice:']) {
      const b64 = Buffer.from(`${prefix}basic pass~word!9 tail`).toString('base64');
      for (const said of [`upstream saw Basic ${b64}`, `upstream saw ${b64.replace(/\+/g, '-').replace(/\//g, '_')}`]) {
        const out = redactConfigSecrets(said);
        expect(out, said).toContain(M);
        // What is left of the base64 text decodes to no more than a character of the value at each end.
        expect(out.replace(/^.* /, '').replace(M, '').length, said).toBeLessThanOrEqual(b64.length - 20);
      }
      expect(JSON.parse(redactConfigSecretsInJson(JSON.stringify({ msg: `Basic ${b64}` }))).msg, prefix).toContain(M);
    }
    expect(redactConfigSecrets('body k=basic+pass%7Eword%219&x=1')).toBe(`body k=${M}&x=1`);
    expect(redactConfigSecrets('said {"k":"quote\\"in-secret"}')).toBe(`said {"k":"${M}"}`);
  });

  it('with many values configured, finds each of them (and every form) as a search per form does, in one pass over the text', () => {
    // Values of many lengths, ASCII and not, some inside others, some sharing their start.
    let seed = 7;
    const rnd = (n: number): number => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
    const alphabet = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_/+=%. é€😀'];
    const word = (n: number): string => Array.from({ length: n }, () => alphabet[rnd(alphabet.length)]).join('');
    const values = Array.from({ length: 60 }, (_, i) => (i % 10 === 0 ? `shared-start-${word(8)}` : word(8 + rnd(40))));
    values.push(`${values[1]}-longer`, values[2].slice(0, 12));
    use(values);
    const forms = [...new Set(values.flatMap((v) => secretForms(v)))];
    for (let round = 0; round < 200; round++) {
      const parts = Array.from({ length: 1 + rnd(6) }, () => (rnd(3) === 0 ? forms[rnd(forms.length)] : word(rnd(300))));
      const text = parts.join(rnd(2) ? ' ' : '');
      // The reference: a substring search for each form, longest first.
      let want = text;
      if (text.length >= MIN_SECRET_LENGTH) for (const f of [...forms].sort((a, b) => b.length - a.length)) if (want.includes(f)) want = want.split(f).join(M);
      expect(redactConfigSecrets(text), text).toBe(want);
    }
    // No search per form: a text is read once (a 200-character line took 700 searches with 60 values).
    const includes = vi.spyOn(String.prototype, 'includes');
    try {
      redactConfigSecrets('a log line about a tool call that went fine, '.repeat(5));
      redactConfigSecretsInJson(JSON.stringify({ msg: 'a log line about a tool call that went fine' }));
      expect(includes.mock.calls.length).toBeLessThan(10);
    } finally {
      includes.mockRestore();
    }
  });

  it('takes a value with a lone surrogate (valid JSON, no URL encoding), and finds it as it is', () => {
    use(['pw-\ud800-0123456789']);
    expect(redactConfigSecrets('said pw-\ud800-0123456789 here')).toBe(`said ${M} here`);
    expect(redactConfigSecretsInJson(JSON.stringify({ m: 'said pw-\ud800-0123456789' }))).toBe(JSON.stringify({ m: `said ${M}` }));
  });

  it('is the union of the owners, and an owner that stops takes its values with it', () => {
    const a = use(['owner-a-secret']);
    use(['owner-b-secret']);
    expect(redactConfigSecrets('owner-a-secret owner-b-secret')).toBe(`${M} ${M}`);
    dropConfigSecrets(a);
    expect(redactConfigSecrets('owner-a-secret owner-b-secret')).toBe(`owner-a-secret ${M}`);
    // Replacing an owner's values (a reload) changes the set.
    useConfigSecrets(a, ['owner-a-rotated']);
    expect(redactConfigSecrets('owner-a-secret owner-a-rotated')).toBe(`owner-a-secret ${M}`);
  });

  it('is part of every error and log path: log lines, upstream errors, lastError, ledger texts, error responses', () => {
    use(['ENVVAL_secret_4410']);
    const said = 'upstream auth failed for key ENVVAL_secret_4410';
    expect(redactLogText(`bare ${said}`)).toBe(`bare upstream auth failed for key ${M}`);
    expect(redactErrorText(said)).toBe(`upstream auth failed for key ${M}`);
    expect(redactString(said)).toBe(`upstream auth failed for key ${M}`);
    expect(redactErrorsIn({ key: 'ENVVAL_secret_4410', n: 1 })).toEqual({ key: M, n: 1 });
    const e = upstreamError({ code: -32001, message: said, data: { key: 'ENVVAL_secret_4410' } });
    expect([e.message, e.data]).toEqual([`upstream auth failed for key ${M}`, { key: M }]);
    expect(errorResponse(1, new RpcError(-32603, said)).error.message).toBe(`upstream auth failed for key ${M}`);
    expect(errorResponse(1, { code: -32603, message: said }).error.message).toBe(`upstream auth failed for key ${M}`);
  });

  it("redacts a server's refusal of the hub's credential before cutting it: a key it quotes across the cut shows no part of it", () => {
    use(['quoted-api-key-0123456789']);
    const advice = unauthorizedAdvice({ error: 'invalid_token', description: `${'x'.repeat(190)} quoted-api-key-0123456789` }, 'up', { 'x-api-key': 'quoted-api-key-0123456789' });
    expect(advice).toContain(`${'x'.repeat(9)} [redacted): check`);
    expect(advice).not.toContain('quoted-api');
  });

  it('is not part of the shape rules the redact-secrets plugin applies to tool results', () => {
    use(['ENVVAL_secret_4410']);
    const result = { content: [{ type: 'text', text: 'your key is ENVVAL_secret_4410' }] };
    expect(redactSecretText('your key is ENVVAL_secret_4410')).toBe('your key is ENVVAL_secret_4410');
    expect(redactSecretsIn(result)).toBe(result);
  });
});
