/**
 * The config's own secret values never leave the hub, even bare: an upstream configured with
 * `${env:…}` (or a literal value under a credential's name) that echoes the value, with no
 * shape the credential rules know, has it replaced by "[redacted:config-secret]" in the hub's
 * log (its stderr), in the error the client gets, in the ledger's row (error message, stored
 * bodies) and in /admin/servers (`lastError`, `stderr`); a reload adds the new config's values.
 * A tool's successful result is the upstream's answer and reaches the client as it was. A value
 * `${env:…}` brought under an ordinary name (a region, a host) is no secret and still shows.
 * The upstream is a real process over stdio (test/fixtures/quirks/echo-secret.mjs).
 */
import Database from 'better-sqlite3';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeServer, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernCall, queryRows, waitForReady, waitForRows } from './ledger-helpers.js';

const FIXTURE = 'test/fixtures/quirks/echo-secret.mjs';
/** Of no known shape: only the hub's knowledge of its config can tell it is a secret. */
const ENV_TOKEN = 'PlainValue-7f3k2m9q';
/** Written literally in the config, under a name that says it is a credential. */
const LITERAL_TOKEN = 'LiteralDown-2x5c8v1b';
/** Brought in by a reload. */
const LATER_TOKEN = 'LaterValue-4h8j1n6p';
/** Given on the command line after `--api-key`. */
const ARG_TOKEN = 'ArgValue-3d6f9h2k';
/** The password of a URL in an env value under an ordinary name (DATABASE_URL). */
const URL_PASSWORD = 'UrlPass-8s1x4c7v';
/** Written literally in a plugin's options under `apiKey`. */
const PLUGIN_KEY = 'PluginKey-6b9n2m5q';
/** Brought in by `${env:…}` under an ordinary name: no secret, so never redacted. */
const REGION = 'eu-central-region-7';
const MARK = '[redacted:config-secret]';
const ALL = [ENV_TOKEN, LITERAL_TOKEN, LATER_TOKEN, ARG_TOKEN, URL_PASSWORD, PLUGIN_KEY];

let hub: HubProcess;
let dir: string;
let db: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'switchyard-config-secrets-'));
  db = join(dir, 'ledger.db');
  // A plugin that says its own key, as careless ones do, in a log line and in a deny's reason.
  const plugin = join(dir, 'quota.mjs');
  writeFileSync(
    plugin,
    `export default ({ options, log }) => ({ name: 'quota', beforeCall(ctx) {
  if (ctx.arguments.quota !== true) return;
  log.warn('quota service refused key ' + options.apiKey);
  return { deny: 'over quota for key ' + options.apiKey };
} });`,
  );
  hub = await startHub(
    {
      ledger: { path: db, storeBodies: true },
      plugins: { paths: [{ path: plugin, options: { apiKey: PLUGIN_KEY } }] },
      servers: {
        echoer: nodeServer(FIXTURE, [], { QUIRK_TOKEN: '${env:SY_ECHO_TOKEN}' }),
        down: nodeServer(FIXTURE, [], { QUIRK_TOKEN: LITERAL_TOKEN, QUIRK_EXIT: '1' }),
        region: nodeServer(FIXTURE, [], { QUIRK_SAY: '${env:SY_REGION}' }),
        argued: nodeServer(FIXTURE, ['--api-key', ARG_TOKEN]),
        dsn: nodeServer(FIXTURE, [], { DATABASE_URL: `postgres://app:${URL_PASSWORD}@db.internal:5432/app` }),
      },
    },
    { dir, env: { SY_ECHO_TOKEN: ENV_TOKEN, SY_LATER_TOKEN: LATER_TOKEN, SY_REGION: REGION } },
  );
  await waitForReady(hub.url, ['echoer', 'region', 'argued', 'dsn']);
}, 60_000);

afterAll(async () => {
  await hub?.stop();
  const logs = hub.logs.join('\n');
  for (const s of ALL) expect(logs).not.toContain(s);
});

describe('a secret value of the config that an upstream echoes bare', () => {
  it('is redacted in the error the client gets and in its ledger row', async () => {
    const r = await modernCall(hub.url, 'cs-1', 'tools/call', { name: 'echoer__slow', arguments: {} });
    const error = r.body?.error as { code: number; message: string; data?: Record<string, unknown> };
    expect(error.code).toBe(-32001);
    expect(error.message).toBe(`upstream auth failed for key ${MARK}`);
    expect(error.data).toEqual({ key: MARK, attempt: 1 });
    const rows = await waitForRows(db, { tool: 'echoer__slow' });
    expect(rows[0]!.errorMessage).toBe(`upstream auth failed for key ${MARK}`);
    expect(JSON.stringify(await queryRows(db))).not.toContain(ENV_TOKEN);
  });

  it("reaches the client in a successful result unchanged, and is redacted in the ledger's stored result", async () => {
    const r = await modernCall(hub.url, 'cs-2', 'tools/call', { name: 'echoer__echo', arguments: { say: ENV_TOKEN } });
    expect((r.body?.result as { content: { text: string }[] }).content[0]!.text).toBe(`you are ${ENV_TOKEN}`);
    await waitForRows(db, { tool: 'echoer__echo' });
    const d = new Database(db, { readonly: true });
    try {
      const row = d.prepare('SELECT args_json, result_json FROM audit WHERE request_id = ?').get('cs-2') as { args_json: string; result_json: string };
      expect(JSON.parse(row.args_json)).toEqual({ say: MARK });
      expect(row.result_json).toContain(`you are ${MARK}`);
      expect(row.result_json).not.toContain(ENV_TOKEN);
    } finally {
      d.close();
    }
  });

  it("is redacted in the hub's log of the upstream's stderr", async () => {
    await expect.poll(() => hub.logs.some((l) => l.includes('child stderr') && l.includes(`starting with key ${MARK}`)), { timeout: 10_000 }).toBe(true);
  });

  it('written literally under a credential name, is redacted in /admin/servers (lastError, stderr) and /healthz', async () => {
    const base = hub.url.replace(/\/mcp$/, '');
    type View = { id: string; lastError: string | null; stderr?: string | null };
    let down: View | undefined;
    await expect
      .poll(async () => {
        const body = (await (await fetch(`${base}/admin/servers`)).json()) as { servers: View[] };
        down = body.servers.find((s) => s.id === 'down');
        return Boolean(down?.lastError && down.stderr);
      }, { timeout: 15_000 })
      .toBe(true);
    expect(down!.stderr).toBe(`Error: login refused for key ${MARK}`);
    expect(JSON.stringify(down)).not.toContain(LITERAL_TOKEN);
    const health = await (await fetch(`${base}/healthz`)).text();
    expect(health).not.toContain(LITERAL_TOKEN);
    await expect.poll(() => hub.logs.some((l) => l.includes(`login refused for key ${MARK}`))).toBe(true);
  });

  it("given after a secret flag in args, or as a URL's password in any env value, is redacted in the log and the error", async () => {
    for (const id of ['argued', 'dsn'])
      await expect.poll(() => hub.logs.some((l) => l.includes(`"server":"${id}"`) && l.includes(`starting with key ${MARK}`)), { timeout: 10_000 }).toBe(true);
    for (const id of ['argued', 'dsn']) {
      const r = await modernCall(hub.url, `cs-${id}`, 'tools/call', { name: `${id}__slow`, arguments: {} });
      expect(r.body?.error?.message).toBe(`upstream auth failed for key ${MARK}`);
    }
    const admin = await (await fetch(hub.url.replace(/\/mcp$/, '/admin/servers'))).text();
    for (const s of [ARG_TOKEN, URL_PASSWORD]) expect(admin).not.toContain(s);
  });

  it("written literally in a plugin's options under a credential's name, is redacted in its deny, the row and its log line", async () => {
    const r = await modernCall(hub.url, 'cs-quota', 'tools/call', { name: 'echoer__echo', arguments: { quota: true } });
    expect(JSON.stringify(r.body)).toContain(`over quota for key ${MARK}`);
    expect(JSON.stringify(r.body)).not.toContain(PLUGIN_KEY);
    const rows = await waitForRows(db, { tool: 'echoer__echo' }, (rs) => rs.some((x) => x.requestId === 'cs-quota'));
    expect(rows.find((x) => x.requestId === 'cs-quota')!.errorMessage).toContain(`over quota for key ${MARK}`);
    await expect.poll(() => hub.logs.some((l) => l.includes(`quota service refused key ${MARK}`))).toBe(true);
  });

  it('is only what sits where a secret goes: a value brought in under an ordinary name still shows', async () => {
    await expect.poll(() => hub.logs.some((l) => l.includes('"server":"region"') && l.includes(`starting with key ${REGION}`)), { timeout: 10_000 }).toBe(true);
    const r = await modernCall(hub.url, 'cs-4', 'tools/call', { name: 'region__slow', arguments: {} });
    expect(r.body?.error?.message).toBe(`upstream auth failed for key ${REGION}`);
  });

  it('brought in by a reload, is redacted from the first line the new server says', async () => {
    const config = JSON.parse(readFileSync(hub.configFile, 'utf8')) as { servers: Record<string, unknown> };
    config.servers.later = nodeServer(FIXTURE, [], { QUIRK_TOKEN: '${env:SY_LATER_TOKEN}' });
    writeFileSync(hub.configFile, JSON.stringify(config, null, 2));
    const base = hub.url.replace(/\/mcp$/, '');
    expect((await fetch(`${base}/admin/reload`, { method: 'POST' })).status).toBe(200);
    await waitForReady(hub.url, ['later']);
    await expect.poll(() => hub.logs.some((l) => l.includes('"server":"later"') && l.includes(`starting with key ${MARK}`)), { timeout: 10_000 }).toBe(true);
    const r = await modernCall(hub.url, 'cs-3', 'tools/call', { name: 'later__slow', arguments: {} });
    expect(r.body?.error?.message).toBe(`upstream auth failed for key ${MARK}`);
    expect(hub.logs.join('\n')).not.toContain(LATER_TOKEN);
  });
});
