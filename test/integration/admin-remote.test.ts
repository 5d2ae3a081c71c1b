/**
 * With authentication on, the operator routes are for an admin credential wherever its holder
 * connects from (SECURITY.md), not only over loopback: the hub listens on this machine's own
 * network address and is reached there, the real built binary over real HTTP.
 */
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { sha256Hex } from '../helpers/auth.js';
import { startHub, type HubProcess } from '../helpers/hub-process.js';

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
