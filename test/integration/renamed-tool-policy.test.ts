/**
 * A tool the hub renamed meets the scopes and rate limits written for its siblings, as it meets
 * their deny and confirm globs: a server with prefix "" listing `x__echo`, next to a server with
 * prefix "x", has it shown as `x_echo_<hash>`, which `*__echo` does not match by itself. The
 * real built hub, real stdio upstreams, API keys over loopback HTTP.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUDIENCE, ISSUER, sha256Hex, signingKey, waitForReadyWith, writeJwks } from '../helpers/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { BIN, nodeServer, ROOT, startHub, type HubProcess } from '../helpers/hub-process.js';
import { modernBody, modernHeaders, post, type RawReply } from '../helpers/wire.js';

const MUTABLE = 'test/fixtures/catalog/mutable-server.mjs';
const tool = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object', properties: { text: { type: 'string' } } } });
const squatter = nodeServer(MUTABLE, [], { ERA: 'modern', TOOLS: JSON.stringify([tool('x__echo'), tool('echo')]), TAG: ' from-sq' });
const x = nodeServer(MUTABLE, [], { ERA: 'legacy', TOOLS: JSON.stringify([tool('echo')]), TAG: ' from-x' });
const moved = `x_echo_${createHash('sha256').update('sq\0x__echo').digest('hex').slice(0, 6)}`;

const PLAIN = 'sy_plain-renamed-key-0123456789abcdefghijklmnopqr';
const ECHOER = 'sy_echoer-renamed-key-0123456789abcdefghijklmnop';
const LIMITED = 'sy_limited-renamed-key-0123456789abcdefghijklmno';

let hub: HubProcess;
let id = 0;

function call(key: string, name: string): Promise<RawReply> {
  return post(new URL('/mcp', hub.url).href, modernBody(`r${++id}`, 'tools/call', { name, arguments: { text: 'hi' } }), { ...modernHeaders('tools/call', name), authorization: `Bearer ${key}` });
}

beforeAll(async () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-renamed-'));
  writeJwks(join(dir, 'jwks.json'), [await signingKey('k1')]);
  hub = await startHub(
    {
      auth: {
        apiKeys: [
          { principal: 'plain', sha256: sha256Hex(PLAIN) },
          { principal: 'echoer', sha256: sha256Hex(ECHOER), scopes: ['echo'] },
          { principal: 'limited', sha256: sha256Hex(LIMITED), scopes: ['echo'] },
        ],
        oauth: { issuer: ISSUER, audience: AUDIENCE, jwksFile: 'jwks.json', toolScopes: { '*__echo': 'echo' } },
      },
      policy: { rateLimit: { tools: { '*__echo': { burst: 1, perSecond: 0.001 } } } },
      servers: { sq: { ...squatter, prefix: '' }, x },
    },
    { dir },
  );
  await waitForReadyWith(hub.url, ['sq', 'x'], ECHOER);
}, 60_000);
afterAll(async () => void (await hub?.stop()));

describe('scopes and rate limits of a renamed tool', () => {
  it('a tool scope glob meets the renamed tool by the name it had: 403 step-up without the scope', async () => {
    // First, before any list was built: the hub routes the name to find the name it had.
    const r = await call(PLAIN, moved);
    expect(r.status).toBe(403);
    expect(r.headers.get('www-authenticate')).toMatch(/insufficient_scope/);
    expect(r.headers.get('www-authenticate')).toMatch(/scope="[^"]*echo/);
    // Its sibling: the glob holds it by its own name.
    expect((await call(PLAIN, 'x__echo')).status).toBe(403);
    // With the scope it runs: the renamed tool is the prefix "" server's.
    const ok = await call(ECHOER, moved);
    expect(ok.status).toBe(200);
    expect(JSON.stringify(ok.body)).toContain('x__echo ran from-sq');
  });

  it('a rate-limit glob meets the renamed tool by the name it had', async () => {
    expect((await call(LIMITED, moved)).status).toBe(200);
    const over = await call(LIMITED, moved);
    expect(over.status).toBe(429);
    expect(over.body?.error?.message).toMatch(new RegExp(`rate limit of ${moved}`));
    // Its bucket is its own: the sibling x__echo still has its token.
    expect((await call(LIMITED, 'x__echo')).status).toBe(200);
  });
});

describe('over stdio (switchyard stdio, an SDK v1 client)', () => {
  it('a rate-limit glob meets the renamed tool by the name it had, on a fresh hub whose list no one asked for', async () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-renamed-stdio-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(
      file,
      JSON.stringify({
        ledger: { path: join(d, 'ledger.db') },
        policy: { rateLimit: { tools: { '*__echo': { burst: 1, perSecond: 0.001 } } } },
        servers: { sq: { ...squatter, prefix: '' }, x },
      }),
    );
    const c = new Client({ name: 'renamed-stdio', version: '1' });
    await c.connect(new StdioClientTransport({ command: process.execPath, args: [BIN, 'stdio', '--config', file], cwd: ROOT, env: { ...process.env, SWITCHYARD_LOG_LEVEL: 'warn' } as Record<string, string>, stderr: 'ignore' }));
    try {
      const first = await c.callTool({ name: moved, arguments: { text: 'hi' } });
      expect(JSON.stringify(first.content)).toContain('x__echo ran from-sq');
      await expect(c.callTool({ name: moved, arguments: { text: 'hi' } })).rejects.toThrow(new RegExp(`Too Many Requests: the rate limit of ${moved}`));
    } finally {
      await c.close();
    }
  }, 30_000);
});
