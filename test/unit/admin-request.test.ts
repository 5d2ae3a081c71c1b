/**
 * How the operator commands read an admin route's answer (src/cli/admin-request.ts): a
 * switchyard daemon's refusal of the key is told by its own challenge, API keys or OAuth; any
 * other answer that is not JSON is named by status and content type, its body never printed.
 */
import { describe, expect, it } from 'vitest';
import { serversAnswer } from '../../src/cli/admin-answers.js';
import { AdminKeyRefused, getJson, OtherProgramError, readAnswer, switchyardChallenge } from '../../src/cli/admin-request.js';
import { daemonBase, DaemonError, daemonErrorLine } from '../../src/cli/daemon-client.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';

const BASE = 'http://127.0.0.1:7410';
const answer = (status: number, headers: Record<string, string>) => ({ status, ok: status >= 200 && status < 300, headers: new Headers(headers) });
const rpcError = (message: string) => JSON.stringify({ jsonrpc: '2.0', error: { code: -32600, message } });

describe('switchyardChallenge', () => {
  it("knows the hub's challenges, and only those", () => {
    expect(switchyardChallenge('Bearer realm="switchyard"', BASE)).toBe(true);
    expect(switchyardChallenge('Bearer error="insufficient_scope", scope="switchyard:admin", realm="switchyard"', BASE)).toBe(true);
    expect(switchyardChallenge(`Bearer resource_metadata="${BASE}/.well-known/oauth-protected-resource/mcp", scope="mcp"`, BASE)).toBe(true);
    expect(switchyardChallenge('Bearer resource_metadata="https://elsewhere.example/.well-known/oauth-protected-resource"', BASE)).toBe(false);
    expect(switchyardChallenge('Basic realm="router admin"', BASE)).toBe(false);
    expect(switchyardChallenge('Basic realm="switchyard"', BASE)).toBe(false);
    expect(switchyardChallenge(null, BASE)).toBe(false);
  });

  it("knows the OAuth challenge of a hub's admin listener (listen.admin), which names the metadata at the main listener", () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-challenge-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ listen: { port: 7500, admin: { port: 7501 } } }));
    const admin = daemonBase(undefined, file);
    expect(admin).toBe('http://127.0.0.1:7501');
    expect(switchyardChallenge('Bearer resource_metadata="http://127.0.0.1:7500/.well-known/oauth-protected-resource/mcp", scope="mcp"', admin)).toBe(true);
    expect(switchyardChallenge('Bearer resource_metadata="http://127.0.0.1:7502/.well-known/oauth-protected-resource/mcp", scope="mcp"', admin)).toBe(false);
    expect(switchyardChallenge('Bearer resource_metadata="http://127.0.0.1:7500/.well-known/oauth-protected-resource/mcp"', `unix:${join(d, 'admin.sock')}`)).toBe(true);
  });
});

describe('readAnswer', () => {
  it('a switchyard 401 or 403 says a daemon runs there and what key it wants', () => {
    const none = readAnswer(BASE, '/admin/servers', answer(401, { 'www-authenticate': 'Bearer realm="switchyard"' }), rpcError('Unauthorized: authentication required'), false);
    expect('error' in none && none.error).toBeInstanceOf(AdminKeyRefused);
    expect('error' in none && none.error.message).toBe(`a switchyard daemon runs at ${BASE} and needs an admin key: set SWITCHYARD_API_KEY to one (HTTP 401: Unauthorized: authentication required)`);
    const wrong = readAnswer(BASE, '/admin/servers', answer(401, { 'www-authenticate': 'Bearer realm="switchyard", error="invalid_token"' }), rpcError('Unauthorized: unknown API key'), true);
    expect('error' in wrong && wrong.error.message).toBe(`a switchyard daemon runs at ${BASE} and refused the key in SWITCHYARD_API_KEY (HTTP 401: Unauthorized: unknown API key): set it to one of its admin keys`);
    const user = readAnswer(BASE, '/admin/reload', answer(403, { 'www-authenticate': 'Bearer error="insufficient_scope", scope="switchyard:admin", realm="switchyard"' }), JSON.stringify({ error: 'Forbidden: the operator routes need the admin scope' }), true);
    expect('error' in user && user.error).toBeInstanceOf(AdminKeyRefused);
    expect('error' in user && user.error.message).toMatch(/^a switchyard daemon runs at \S+; the key in SWITCHYARD_API_KEY is not an admin key \(HTTP 403: Forbidden: /);
  });

  it("another program's page is named by status and content type, not printed; a JSON error is said as such", () => {
    const page = readAnswer(BASE, '/admin/tools', answer(404, { 'content-type': 'text/html; charset=utf-8' }), '<!DOCTYPE html><html><body>Cannot GET /admin/tools</body></html>', false);
    expect('error' in page && page.error).toBeInstanceOf(OtherProgramError);
    expect('error' in page && page.error.message).toBe(`${BASE}/admin/tools answered HTTP 404 (text/html), which is not a switchyard daemon's answer: is another program on that port?`);
    // A 200 that is no JSON, a 401 of another kind (no switchyard challenge): the same.
    expect(readAnswer(BASE, '/admin/servers', answer(200, {}), 'hi', false)).toMatchObject({ error: { message: expect.stringContaining('answered HTTP 200 (no content type)') } });
    const basic = readAnswer(BASE, '/admin/servers', answer(401, { 'www-authenticate': 'Basic realm="router"', 'content-type': 'text/html' }), '<html>login</html>', false);
    expect('error' in basic && basic.error).toBeInstanceOf(OtherProgramError);
    const json = readAnswer(BASE, '/admin/servers/x/restart', answer(404, { 'content-type': 'application/json' }), JSON.stringify({ error: 'no server "x" is running' }), false);
    expect('error' in json && json.error).toBeInstanceOf(DaemonError);
    // The daemon's words first; its status and address last (the route and status led, as noise).
    expect('error' in json && json.error.message).toBe(`no server "x" is running [HTTP 404 from ${BASE}]`);
    expect('error' in json && daemonErrorLine(json.error, 'servers restart')).toBe(`switchyard servers restart: no server "x" is running [HTTP 404 from ${BASE}]\n`);
    // No words of its own: which route answered which status is all there is to say.
    const bare = readAnswer(BASE, '/admin/tools?all=1', answer(500, { 'content-type': 'application/json' }), '{}', false);
    expect('error' in bare && bare.error.message).toBe(`the daemon at ${BASE} answered HTTP 500 to /admin/tools`);
    expect(readAnswer(BASE, '/admin/reload', answer(422, {}), JSON.stringify({ status: 'rejected', problems: [] }), false, [422])).toEqual({ body: { status: 'rejected', problems: [] } });
  });
});

describe('a request that gets no answer', () => {
  /** A port that takes connections and does `onConnection` with each; its base, and a close. */
  async function port(onConnection: (s: Socket) => void): Promise<{ base: string; close: () => void }> {
    const srv = createServer(onConnection);
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    return { base: `http://127.0.0.1:${(srv.address() as { port: number }).port}`, close: () => void srv.close() };
  }
  const lineOf = async (base: string, timeoutMs: number): Promise<string> => {
    const err = await getJson(base, '/admin/servers', serversAnswer, { timeoutMs }).then(
      () => new Error('answered'),
      (e: Error) => e,
    );
    return daemonErrorLine(err, 'servers');
  };

  it('is said as the command\'s, what happened first and the address last, not led by the admin route', async () => {
    const held: Socket[] = [];
    const silent = await port((s) => void held.push(s));
    const closing = await port((s) => s.destroy());
    try {
      expect(await lineOf(silent.base, 300)).toBe(`switchyard servers: no answer within 0.3 s [at ${silent.base}]\n`);
      expect(await lineOf(closing.base, 5000)).toBe(`switchyard servers: the request failed: other side closed [at ${closing.base}]\n`);
    } finally {
      for (const s of held) s.destroy();
      silent.close();
      closing.close();
    }
  });
});
