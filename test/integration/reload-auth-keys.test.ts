/**
 * A reload applies added and removed API keys whatever else in `auth` changed (the rest of
 * `auth`, here OAuth's clock tolerance, waits for a restart and is said to), and the next reload
 * compares with the keys in force. `switchyard reload` never passes an earlier reload's report
 * off as this one's when this one found a change, even one left for a restart. The real built
 * daemon (its file watch off, so only the command reloads), the real `switchyard keys remove`.
 */
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIENCE, ISSUER, sha256Hex, signingKey, writeJwks } from '../helpers/auth.js';
import { runCli } from '../helpers/cli.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post } from '../helpers/wire.js';

const OPS = 'sy_ops-authreload-key-0123456789abcdefghijklmnopqr';
const BOB = 'sy_bob-authreload-key-0123456789abcdefghijklmnopqr';
const CAROL = 'sy_carol-authreload-key-0123456789abcdefghijklmnop';
const DAVE = 'sy_dave-authreload-key-0123456789abcdefghijklmnopq';
const RESTART = '  changed, but only a restart applies them (the running values are kept): auth\n';

describe('a reload that changes API keys and the rest of auth', () => {
  let hub: HubProcess;
  let n = 0;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-authreload-'));
    writeJwks(join(dir, 'jwks.json'), [await signingKey('k1')]);
    const apiKeys = [
      { principal: 'ops', sha256: sha256Hex(OPS), scopes: ['switchyard:admin'] },
      { principal: 'bob', sha256: sha256Hex(BOB) },
      { principal: 'carol', sha256: sha256Hex(CAROL) },
      { principal: 'dave', sha256: sha256Hex(DAVE) },
    ];
    hub = await startHub({ auth: { apiKeys, oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json' } }, servers: {} }, { dir, args: ['--no-watch'] });
  }, 60_000);
  afterAll(async () => void (await hub?.stop()));

  const status = async (key: string) => (await post(hub.url, modernBody(++n, 'server/discover'), { ...modernHeaders('server/discover'), authorization: `Bearer ${key}` })).status;
  const reload = async () => {
    const r = await runCli(['reload', '--url', hub.url], { env: { SWITCHYARD_API_KEY: OPS } });
    expect([r.code, r.stderr]).toEqual([0, '']);
    return r.stdout;
  };
  const setTolerance = (sec: number) => {
    const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { auth: { oauth: Record<string, unknown> } };
    c.auth.oauth.clockToleranceSec = sec;
    writeFileSync(hub.configFile, JSON.stringify(c, null, 2));
  };
  const removeKey = async (principal: string) => {
    const r = await runCli(['keys', 'remove', principal, '--config', hub.configFile]);
    expect(r.code, r.stderr).toBe(0);
  };

  it('applies the key change, reports the rest for a restart, and never shows an earlier reload as this one', async () => {
    for (const k of [OPS, BOB, CAROL, DAVE]) expect(await status(k)).toBe(200);
    // An unrelated key change first: the report a later reload must not pass off as its own.
    await removeKey('carol');
    expect(await reload()).toBe('reloaded:\n  applied: auth.apiKeys\n');
    expect(await status(CAROL)).toBe(401);

    // Two writes: OAuth's clock tolerance (a restart applies it), then bob's key goes.
    setTolerance(60);
    expect(await reload()).toBe(`reloaded:\n${RESTART}`);
    expect(await status(BOB)).toBe(200);
    await removeKey('bob');
    expect(await reload()).toBe(`reloaded:\n  applied: auth.apiKeys\n${RESTART}`);
    expect(await status(BOB)).toBe(401);
    // Nothing new: the reload that did it is told, and the tolerance still waits for a restart
    // (the running config kept its own, not the file's).
    expect(await reload()).toMatch(new RegExp(`^reloaded: nothing new since \\S+, when the daemon applied this file \\(its file watch, SIGHUP or an earlier reload\\):\\n  applied: auth\\.apiKeys\\n${RESTART.replace(/[()]/g, '\\$&')}$`));

    // One write: the tolerance again and dave's key; compared with the keys in force.
    const c = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { auth: { apiKeys: { principal: string }[]; oauth: Record<string, unknown> } };
    c.auth.oauth.clockToleranceSec = 90;
    c.auth.apiKeys = c.auth.apiKeys.filter((k) => k.principal !== 'dave');
    writeFileSync(hub.configFile, JSON.stringify(c, null, 2));
    expect(await reload()).toBe(`reloaded:\n  applied: auth.apiKeys\n${RESTART}`);
    expect(await status(DAVE)).toBe(401);
    expect(await status(OPS)).toBe(200);
    const revoked = hub.logs.filter((l) => l.includes('API keys replaced')).map((l) => (JSON.parse(l) as { principals: string[] }).principals);
    expect(revoked).toEqual([['ops', 'bob', 'dave'], ['ops', 'dave'], ['ops']]);
    expect(hub.logs.join('\n')).not.toMatch(/sy_\w+-authreload-key/);
  }, 60_000);
});
