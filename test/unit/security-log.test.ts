/**
 * Log hygiene of the real logger (built module, own process, stderr captured): credentials are
 * redacted and errors carry no stack.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/hub-process.js';

const SCRIPT = `
const { createLogger } = await import(${JSON.stringify(join(ROOT, 'dist/src/log.js'))});
const log = createLogger('info');
const err = new Error('upstream refused');
err.code = 'ECONNREFUSED';
log.error({ err, headers: { authorization: 'Bearer sy_secret-key', 'x-api-key': 'sy_other-secret', cookie: 'sid=1' } }, 'failed');
log.warn({ err: new Error('connect failed: postgres://app:pg-Secret-9@db/app (PGPASSWORD=pg-Other-8)') }, 'upstream');
log.info({ server: { credentials: { alice: { headers: { Authorization: 'Bearer alice-secret' } } } }, token: 'jwt-secret' }, 'config');
log.flush();
`;

describe('logger hygiene', () => {
  it('redacts credentials and logs errors without a stack', () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', SCRIPT], { encoding: 'utf8', env: { ...process.env, SWITCHYARD_LOG_STACKS: '' } });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0].err).toEqual({ type: 'Error', message: 'upstream refused', code: 'ECONNREFUSED' });
    expect(lines[0].headers).toEqual({ authorization: '[redacted]', 'x-api-key': '[redacted]', cookie: '[redacted]' });
    expect((lines[1].err as { message: string }).message).toBe('connect failed: postgres://app:[redacted:url-credentials]@db/app (PGPASSWORD=[redacted:credential]');
    for (const secret of ['pg-Secret-9', 'pg-Other-8', 'sy_secret-key', 'sy_other-secret', 'alice-secret', 'jwt-secret', ' at ']) expect(r.stderr).not.toContain(secret);
  });
});

const CONFIG_SECRET_SCRIPT = `
const { createLogger } = await import(${JSON.stringify(join(ROOT, 'dist/src/log.js'))});
const { useConfigSecrets } = await import(${JSON.stringify(join(ROOT, 'dist/src/policy/config-secrets.js'))});
useConfigSecrets({}, ['ENVVAL_secret_4410', 'has"quote-secret']);
const log = createLogger('info');
log.info({ server: 's', detail: 'auth failed for ENVVAL_secret_4410', nested: { said: ['x has"quote-secret y'] } }, 'anything at all');
log.warn({ err: new Error('spawn failed: ENVVAL_secret_4410') }, 'upstream');
log.flush();
`;

describe('logger and the config secrets', () => {
  it("replaces the config's own secret values anywhere in a line, which stays JSON", () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', CONFIG_SECRET_SCRIPT], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).not.toContain('ENVVAL_secret_4410');
    expect(r.stderr).not.toContain('quote-secret');
    const lines = r.stderr.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines[0]).toMatchObject({ detail: 'auth failed for [redacted:config-secret]', nested: { said: ['x [redacted:config-secret] y'] } });
    expect((lines[1].err as { message: string }).message).toBe('spawn failed: [redacted:config-secret]');
  });
});

const LONG_SCRIPT = `
const { createLogger, MAX_LOGGED_CHARS } = await import(${JSON.stringify(join(ROOT, 'dist/src/log.js'))});
const { useConfigSecrets } = await import(${JSON.stringify(join(ROOT, 'dist/src/policy/config-secrets.js'))});
useConfigSecrets({}, ['CUTSECRET_value_77']);
const log = createLogger('info');
// The secret straddles the cut: a cut made first would leave its first half in the line.
const long = 'x'.repeat(MAX_LOGGED_CHARS - 5) + 'CUTSECRET_value_77' + 'y'.repeat(100000);
log.warn({ id: long, nested: { list: ['z'.repeat(50000)] }, err: new Error('e'.repeat(50000)) }, 'long values');
log.flush();
`;

describe('logger and long values', () => {
  it('cuts every long string of a line, after redacting the config secrets in it', () => {
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', LONG_SCRIPT], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr.length).toBeLessThan(20_000);
    expect(r.stderr).not.toContain('CUTSECR');
    const line = JSON.parse(r.stderr.trim()) as { id: string; nested: { list: string[] }; err: { message: string } };
    expect(line.id).toContain('x[reda…'); // the mark, cut: never the secret's first half
    expect(line.id).toMatch(/…\[\d+ more chars\]$/);
    expect(line.nested.list[0]).toMatch(/^z+…\[45904 more chars\]$/);
    expect(line.err.message).toMatch(/^e+…\[45904 more chars\]$/);
  });
});
