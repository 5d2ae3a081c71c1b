/**
 * With authentication on, the operator routes are for an admin credential wherever its holder
 * connects from (SECURITY.md), not only over loopback: the hub listens on this machine's own
 * network address and is reached there, the real built binary over real HTTP.
 */
import { execFile } from 'node:child_process';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { sha256Hex } from '../helpers/auth.js';
import { BIN, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';

const ADMIN_KEY = 'sy_ops-remote-admin-key-0123456789abcdefghijklmnop';
const USER_KEY = 'sy_user-remote-key-0123456789abcdefghijklmnopqrstu';

/** The first IPv4 address of this machine that is not loopback: the tests need one. */
function ownAddress(): string {
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  throw new Error('this machine has no non-loopback IPv4 address to listen on');
}

let hub: HubProcess;
let base: string;

beforeAll(async () => {
  const host = ownAddress();
  hub = await startHub(
    { auth: { apiKeys: [{ principal: 'ops', sha256: sha256Hex(ADMIN_KEY), scopes: ['switchyard:admin'] }, { principal: 'user', sha256: sha256Hex(USER_KEY) }] }, servers: {} },
    { args: ['--host', host] },
  );
  base = new URL(hub.url).origin;
  expect(new URL(base).hostname).toBe(host);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

const get = (path: string, key?: string) => fetch(new URL(path, base), { headers: key ? { authorization: `Bearer ${key}` } : {} });

describe('operator routes off loopback, authentication on', () => {
  it('serve an admin credential', async () => {
    for (const path of ['/admin/servers', '/admin/ledger', '/metrics']) expect((await get(path, ADMIN_KEY)).status, path).toBe(200);
    const ticket = (await (await fetch(new URL('/admin/ticket', base), { method: 'POST', headers: { authorization: `Bearer ${ADMIN_KEY}` } })).json()) as { ticket: string };
    const ws = new WebSocket(`${base.replace('http', 'ws')}/admin/events?ticket=${encodeURIComponent(ticket.ticket)}`);
    const opened = await new Promise<boolean>((resolve) => {
      ws.once('open', () => resolve(true));
      ws.once('error', () => resolve(false));
      ws.once('unexpected-response', () => resolve(false));
    });
    ws.close();
    expect(opened).toBe(true);
  });

  it('refuse anyone else, as on loopback', async () => {
    expect((await get('/admin/servers')).status).toBe(401);
    expect((await get('/admin/servers', USER_KEY)).status).toBe(403);
  });
});

describe('the operator CLI against a hub with authentication on', () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const { SWITCHYARD_API_KEY: _, ...rest } = process.env;
      execFile(process.execPath, [BIN, ...args], { cwd: ROOT, env: { ...rest, ...env }, timeout: 15_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: unknown }).code ?? -1) : 0, stdout, stderr }),
      );
    });

  it('sends SWITCHYARD_API_KEY, and says what is missing without it', async () => {
    const refused = await cli(['servers', '--url', base]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toBe(`switchyard servers: a switchyard daemon runs at ${base} and needs an admin key: set SWITCHYARD_API_KEY to one (HTTP 401: Unauthorized: authentication required)\n`);
    const ok = await cli(['servers', '--json', '--url', base], { SWITCHYARD_API_KEY: ADMIN_KEY });
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual([]);
  });
});
