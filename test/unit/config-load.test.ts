import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { duplicateKeys } from '../../src/config/duplicate-keys.js';
import { ConfigError, configProblems, loadConfig, parseConfig } from '../../src/config/load.js';

const NO_ENV = {};

function problemsOf(json: unknown, env: Record<string, string | undefined> = NO_ENV): string[] {
  try {
    parseConfig(json, undefined, env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

const PREFIX_ERROR =
  'a prefix is at most 48 letters, digits, _ and -, without __ and not starting or ending with _ (the hub puts __ between a prefix and a name: such a prefix would reach into another prefix\'s names, and a longer one leaves no room for the names)';

describe('parseConfig defaults', () => {
  it('fills every default and derives prefix, enabled and the ledger path', () => {
    const c = parseConfig({ servers: { notes: { command: 'node', args: ['n.js'] } } }, '/etc/hub/hub.config.json', NO_ENV);
    expect(c.file).toBe('/etc/hub/hub.config.json');
    expect(c.listen).toEqual({
      host: '127.0.0.1',
      port: 7410,
      allowedOrigins: [],
      maxBodyBytes: 4 * 1024 * 1024,
      maxPendingPerSession: 64,
      sessionIdleTimeoutMs: 3_600_000,
      maxSessions: 10_000,
      maxSessionsPerPrincipal: 100,
      requestTimeoutMs: 66000,
      drainTimeoutMs: 10000,
      quietCallStreamMs: 5000,
    });
    expect(c.ledger).toEqual({
      path: '/etc/hub/data/ledger.db',
      enabled: true,
      storeBodies: false,
      redactKeys: undefined,
      idempotencyTtlMs: 24 * 3600 * 1000,
    });
    expect(c.names).toEqual({ mode: 'strict' });
    expect(c.pageSize).toBe(1000);
    expect(c.servers.notes).toEqual({
      id: 'notes',
      command: 'node',
      args: ['n.js'],
      env: {},
      headers: {},
      prefix: 'notes',
      trust: 'untrusted',
      enabled: true,
      timeoutMs: 60000,
      maxTotalTimeoutMs: 600000,
      failMode: 'open',
      maxConcurrent: 32,
      maxQueue: 256,
      retry: { maxAttempts: 3, budgetMs: 10000 },
      circuitBreaker: { failures: 5, cooldownMs: 5000 },
      era: 'auto',
      probeTimeoutMs: 5000,
      healthCheckMs: 30000,
      maxFrameBytes: 4 * 1024 * 1024,
      tools: { byName: {} },
    });
  });

  it("refuses an API key held by one of the ledger's own principals (hub, anonymous, local: the client of switchyard stdio), in any case", () => {
    for (const principal of ['hub', 'anonymous', 'HUB', 'Hub', 'AnonyMous', 'local', 'LOCAL'])
      expect(problemsOf({ auth: { apiKeys: [{ principal, sha256: 'a'.repeat(64) }] }, servers: {} }).join('\n'), principal).toMatch(/auth\.apiKeys\[0\]\.principal: .*not hub, anonymous or local/);
    for (const principal of ['hubert', 'the-hub', 'anonymous2', 'locally'])
      expect(parseConfig({ auth: { apiKeys: [{ principal, sha256: 'a'.repeat(64) }] }, servers: {} }, undefined, NO_ENV).auth?.apiKeys[0]?.principal).toBe(principal);
  });

  it('refuses a listen.admin.path longer than a unix socket can have (node cut it short and bound there), and one with no room for the bind beside it', () => {
    const dir = `/srv/${'d'.repeat(95)}`; // 100 bytes
    const file = join(dir, 'hub.config.json');
    const problems = (path: string) => {
      try {
        parseConfig({ listen: { admin: { path } }, servers: {} }, file, NO_ENV);
        return [];
      } catch (e) {
        return (e as ConfigError).problems;
      }
    };
    const over = `${dir}/admin-socket.sock`;
    const limit = process.platform === 'linux' ? 107 : 103;
    // Relative to the config file's folder, counted as resolved; in bytes.
    expect(problems('admin-socket.sock')).toEqual([`listen.admin.path: ${over} is ${over.length} bytes, longer than a unix socket's path can be (${limit} bytes): give a shorter path (a folder nearer the root, such as $XDG_RUNTIME_DIR or /tmp/<name>)`]);
    expect(problems('/tmp/é'.padEnd(60, 'é'))[0]).toMatch(/ is 115 bytes, longer than/);
    // Short enough itself, but the hub binds it first at <folder>/.XXXXXX/s.
    if (process.platform === 'linux') expect(problems('a.s')).toEqual([`listen.admin.path: ${dir}/a.s: the hub binds the socket first in a folder beside it, at ${dir}/.XXXXXX/s (110 bytes), longer than a unix socket's path can be (107 bytes): give a shorter path (a folder nearer the root, such as $XDG_RUNTIME_DIR or /tmp/<name>)`]);
    expect(problems('/tmp/admin.sock')).toEqual([]);
  });

  it('refuses ":memory:" as the path of an enabled ledger (it made files of that name and kept them)', () => {
    const said = 'ledger.path: ":memory:" cannot hold the ledger (it keeps files beside its database: rows pending commit, its lock); give a file path, or set ledger.enabled to false for no ledger';
    expect(configProblems({ ledger: { path: ':memory:' } }, NO_ENV)).toEqual([said]);
    expect(configProblems({ ledger: { path: ':memory:', enabled: true } }, NO_ENV)).toEqual([said]);
    expect(configProblems({ ledger: { path: ':memory:', enabled: false } }, NO_ENV)).toEqual([]);
  });

  it('accepts an empty document as a hub without servers', () => {
    expect(parseConfig({}, undefined, NO_ENV).servers).toEqual({});
  });

  it('keeps explicit values, an empty prefix, and config order of servers', () => {
    const c = parseConfig(
      {
        $schema: './src/config/hub.config.schema.json',
        listen: { host: '0.0.0.0', port: 0, allowedOrigins: ['http://localhost:3000'], maxBodyBytes: 1024 },
        ledger: { path: ':memory:', enabled: false, storeBodies: true, redactKeys: 'x', idempotencyTtl: 1500 },
        names: { mode: 'spec' },
        pageSize: 5,
        servers: {
          zeta: { url: 'https://example.test/mcp', prefix: '', trust: 'trusted', era: '2026-07-28', cacheTtlMs: 0 },
          alpha: { command: 'x', enabled: false, timeoutMs: 10, probeTimeoutMs: 20, maxFrameBytes: 30, cwd: 'work' },
        },
        auth: { apiKeys: [] },
        groups: {},
      },
      '/srv/hub.json',
      NO_ENV,
    );
    expect(Object.keys(c.servers)).toEqual(['zeta', 'alpha']);
    expect(c.listen.port).toBe(0);
    expect(c.ledger.path).toBe(':memory:');
    expect(c.ledger.idempotencyTtlMs).toBe(1500);
    expect(c.names.mode).toBe('spec');
    expect(c.servers.zeta).toMatchObject({ url: 'https://example.test/mcp', prefix: '', trust: 'trusted', era: '2026-07-28', cacheTtlMs: 0 });
    expect(c.servers.zeta.command).toBeUndefined();
    expect(c.servers.alpha).toMatchObject({ enabled: false, timeoutMs: 10, probeTimeoutMs: 20, maxFrameBytes: 30, cwd: '/srv/work' });
    expect(c.auth).toEqual({ apiKeys: [] });
    expect(c.groups).toEqual({});
    expect(c.policy).toBeUndefined();
  });

  it.each([
    ['500ms', 500],
    ['90s', 90_000],
    ['30m', 1_800_000],
    ['24h', 86_400_000],
    ['7d', 604_800_000],
    [0, 0],
  ])('reads idempotencyTtl %j as %i ms', (ttl, ms) => {
    expect(parseConfig({ ledger: { idempotencyTtl: ttl } }, undefined, NO_ENV).ledger.idempotencyTtlMs).toBe(ms);
  });

  it('refuses an idempotencyTtl of the right shape but too long to count in milliseconds (it was taken as 24h)', () => {
    for (const ttl of ['99999999999999d', 2 ** 53 + 2]) expect(problemsOf({ ledger: { idempotencyTtl: ttl } }), String(ttl)).toEqual([`ledger.idempotencyTtl: too long (at most ${Number.MAX_SAFE_INTEGER} ms)`]);
    expect(configProblems({ ledger: { idempotencyTtl: '36500d' } }, NO_ENV)).toEqual([]);
  });

  it('splits tools into allow/deny and per-tool settings', () => {
    const c = parseConfig(
      {
        servers: {
          gh: {
            command: 'x',
            tools: {
              allow: ['a', 'b'],
              deny: ['c'],
              delete_repo: { annotations: { destructiveHint: true, title: 'Delete' } },
            },
          },
        },
      },
      undefined,
      NO_ENV,
    );
    expect(c.servers.gh.tools).toEqual({
      allow: ['a', 'b'],
      deny: ['c'],
      byName: { delete_repo: { annotations: { destructiveHint: true, title: 'Delete' } } },
    });
  });

  it("refuses what a tool's settings cannot hold: a misspelt filter, annotation or setting was ignored, the tool served as if it were not there", () => {
    expect(
      problemsOf({
        servers: {
          gh: {
            command: 'x',
            tools: {
              alow: ['read_*'],
              read_file: { annotations: { readOnly: true, destructiveHint: false } },
              list_files: { anotations: { readOnlyHint: true } },
              delete_repo: { confirm: true },
            },
          },
        },
      }),
    ).toEqual([
      'servers.gh.tools.alow: must be object',
      'servers.gh.tools.read_file.annotations.readOnly: unknown key (expected one of: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint)',
      'servers.gh.tools.list_files.anotations: unknown key: did you mean "annotations"? (expected one of: annotations)',
      'servers.gh.tools.delete_repo.confirm: unknown key: policy.confirm names the tools whose calls the user confirms (globs of hub tool names, such as "gh__delete_*")',
    ]);
  });

  it('per-tool settings are looked up by own name only: __proto__ is a tool name like any other', () => {
    const c = parseConfig(JSON.parse('{"servers":{"gh":{"command":"x","tools":{"__proto__":{"annotations":{"readOnlyHint":true}}}}}}'), undefined, NO_ENV);
    const byName = c.servers.gh.tools.byName;
    expect(Object.keys(byName)).toEqual(['__proto__']);
    expect(byName['__proto__']).toEqual({ annotations: { readOnlyHint: true } });
    // No tool inherits settings, and no name reaches Object.prototype's members.
    for (const name of ['annotations', 'confirm', 'constructor', 'toString', 'hasOwnProperty']) expect(byName[name], name).toBeUndefined();
  });
});

describe('mcpServers alias', () => {
  it('reads IDE-style entries, accepting "type" and "disabled"', () => {
    const c = parseConfig(
      {
        mcpServers: {
          fs: { type: 'stdio', command: 'npx', args: ['-y', 'server-filesystem'], env: { A: 'b' } },
          remote: { type: 'http', url: 'http://127.0.0.1:9/mcp', headers: { 'X-Key': 'k' }, disabled: true },
          old: { type: 'sse', url: 'http://127.0.0.1:9/sse' },
        },
      },
      undefined,
      NO_ENV,
    );
    expect(Object.keys(c.servers)).toEqual(['fs', 'remote', 'old']);
    expect(c.servers.fs).toMatchObject({ command: 'npx', args: ['-y', 'server-filesystem'], env: { A: 'b' }, enabled: true });
    expect(c.servers.remote).toMatchObject({ url: 'http://127.0.0.1:9/mcp', headers: { 'X-Key': 'k' }, enabled: false });
    expect('type' in c.servers.fs).toBe(false);
  });

  it('rejects both sections, and a type that contradicts command/url', () => {
    expect(problemsOf({ servers: {}, mcpServers: {} })).toEqual(['config: use either "servers" or "mcpServers", not both']);
    expect(problemsOf({ mcpServers: { a: { type: 'stdio', url: 'http://x' }, b: { type: 'http', command: 'x' } } })).toEqual([
      'mcpServers.a: "type": "stdio" needs "command"',
      'mcpServers.b: "type" other than "stdio" needs "url"',
    ]);
    expect(problemsOf({ mcpServers: { a: { type: 'websocket', command: 'x' } } })).toEqual([
      'mcpServers.a.type: must be one of "stdio", "http", "sse", "streamable-http", "streamableHttp"',
    ]);
    expect(problemsOf({ servers: { a: { command: 'x', enabled: true, disabled: true } } })).toEqual([
      'servers.a: use either "enabled" or "disabled", not both',
    ]);
    // A process per principal is a stdio server's: a url server's principals have their own connections already.
    expect(problemsOf({ servers: { a: { url: 'http://127.0.0.1:9/mcp', processPerPrincipal: true } } })).toEqual([
      'servers.a: "processPerPrincipal" is for a server with "command" (a url server\'s principals get connections of their own already: see "credentials")',
    ]);
  });
});

describe('problems name their key path, one line each', () => {
  it('reports the examples from the documentation', () => {
    expect(
      problemsOf({
        listen: { port: '7410' },
        servers: { notes: { command: 'a', url: 'http://x' }, 'bad id': { command: 'x' } },
      }),
    ).toEqual([
      'listen.port: must be integer: write 7410 without quotes',
      'servers.bad id: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "bad-id")',
      'servers.notes: must have exactly one of "command" or "url"',
    ]);
  });

  // Clients' configs name servers `brave_search` or `github.com`: the line gave the pattern alone.
  it('says how to rename a server id of other characters, as init --from would', () => {
    expect(problemsOf({ servers: { brave_search: { command: 'x' }, 'github.com/mcp': { command: 'y' }, '__': { command: 'z' } } })).toEqual([
      'servers.brave_search: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "brave-search")',
      'servers.github.com/mcp: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it, such as "github-com-mcp")',
      'servers.__: server id must match ^[A-Za-z0-9-]+$ (letters, digits and "-" only: rename it)',
    ]);
    expect(problemsOf({ mcpServers: { my_server: { command: 'x' } } })).toEqual([
      expect.stringMatching(/^mcpServers\.my_server: .*rename it, such as "my-server"\)$/),
    ]);
  });

  // "listen.port: must be integer" for "7410", which is one to whoever reads it.
  it('says a number or a duration written in quotes is one, and how to write it; quotes nothing else', () => {
    expect(problemsOf({ listen: { port: '7410' }, pageSize: '2.5', servers: { a: { command: 'x', timeoutMs: '30s', maxConcurrent: 'sk-live-hunter2', probeTimeoutMs: '5 s' } } })).toEqual([
      'listen.port: must be integer: write 7410 without quotes',
      'pageSize: must be integer: write 2.5 without quotes',
      'servers.a.timeoutMs: must be integer, in milliseconds: 30000 for "30s"',
      'servers.a.maxConcurrent: must be integer',
      'servers.a.probeTimeoutMs: must be integer',
    ]);
  });

  it('reports a server with neither command nor url', () => {
    expect(problemsOf({ servers: { empty: {} } })).toEqual(['servers.empty: must have exactly one of "command" or "url"']);
  });

  it('says a misspelt "command" or "url" of a server once, as the misspelling (not also "must have exactly one of")', () => {
    expect(problemsOf({ servers: { a: { comand: 'node' }, b: { urll: 'http://127.0.0.1:1/mcp' }, c: { args: [] } } })).toEqual([
      expect.stringMatching(/^servers\.a\.comand: unknown key: did you mean "command"\? \(/),
      expect.stringMatching(/^servers\.b\.urll: unknown key: did you mean "url"\? \(/),
      // With nothing near either key, the shape line stays.
      'servers.c: must have exactly one of "command" or "url"',
    ]);
  });

  it('rejects unknown keys at every level (typos), naming the one meant when it is near, and the known ones', () => {
    const p = problemsOf({ mcpservers: {}, listen: { prot: 1 }, servers: { a: { command: 'x', argz: [], timeoutMS: 5, Header: {} } }, zzz: 1 });
    expect(p).toHaveLength(6);
    expect(p[0]).toMatch(/^mcpservers: unknown key: did you mean "mcpServers"\? \(expected one of: \$schema, listen, .*mcpServers.*\)$/);
    expect(p[1]).toMatch(/^zzz: unknown key \(expected one of: \$schema, /);
    expect(p[2]).toBe('listen.prot: unknown key: did you mean "port"? (expected one of: host, port, allowedOrigins, maxBodyBytes, maxConnections, admin, maxPendingPerSession, sessionIdleTimeoutMs, maxSessions, maxSessionsPerPrincipal, requestTimeoutMs, drainTimeoutMs, quietCallStreamMs)');
    expect(p.slice(3)).toEqual([
      expect.stringMatching(/^servers\.a\.argz: unknown key: did you mean "args"\? \(/),
      expect.stringMatching(/^servers\.a\.timeoutMS: unknown key: did you mean "timeoutMs"\? \(/),
      expect.stringMatching(/^servers\.a\.Header: unknown key: did you mean "headers"\? \(/),
    ]);
  });

  it('checks listen.admin: a socket path (relative to the config file) or a TCP port apart from listen.port, never both or neither', () => {
    const dir = mkdtempSync(join(tmpdir(), 'switchyard-admin-listen-'));
    expect(parseConfig({ listen: { admin: { path: 'run/admin.sock' } } }, join(dir, 'hub.config.json'), NO_ENV).listen.admin).toEqual({ path: join(dir, 'run/admin.sock') });
    expect(parseConfig({ listen: { admin: { port: 7411 } } }, undefined, NO_ENV).listen.admin).toEqual({ port: 7411 });
    expect(parseConfig({ listen: { admin: { host: '::1', port: 7411 } } }, undefined, NO_ENV).listen.admin).toEqual({ host: '::1', port: 7411 });
    // Without it, nothing changes: no admin listener.
    expect(parseConfig({}, undefined, NO_ENV).listen.admin).toBeUndefined();
    // One message for both and for neither (it said "not both" of an empty {}).
    const either = 'listen.admin: needs exactly one of "path" (a unix socket) or "port" (a TCP port, with "host" if not 127.0.0.1)';
    expect(problemsOf({ listen: { admin: { path: 'a.sock', port: 7411 } } })).toEqual([either]);
    expect(problemsOf({ listen: { admin: { path: 'a.sock', host: '127.0.0.1' } } })).toEqual([either]);
    expect(problemsOf({ listen: { admin: {} } })).toEqual([either]);
    expect(problemsOf({ listen: { admin: { host: '127.0.0.1' } } })).toEqual([either]);
    // Port 0 would leave the CLI nowhere to find it; one port for both listeners could never bind.
    expect(problemsOf({ listen: { admin: { port: 0 } } })).toEqual(['listen.admin.port: must be >= 1']);
    expect(problemsOf({ listen: { port: 7500, admin: { port: 7500 } } })).toEqual(['listen.admin.port: must differ from listen.port (7500): the admin listener is a listener of its own']);
    expect(problemsOf({ listen: { admin: { port: 7410 } } })).toEqual(['listen.admin.port: must differ from listen.port (7410): the admin listener is a listener of its own']);
    expect(problemsOf({ listen: { admin: { path: '' } } })).toEqual(['listen.admin.path: must not be empty']);
    expect(problemsOf({ listen: { admin: { socket: 'a.sock' } } })).toEqual([either, 'listen.admin.socket: unknown key (expected one of: path, host, port, exclusive)']);
    expect(problemsOf({ listen: { admin: 'a.sock' } })).toEqual(['listen.admin: must be object']);
  });

  // Values of two shapes said "must be string" and "must be object" (or array) at once, or only the first.
  it('says what a plugins.paths entry and a toolScopes value may be, in one line', () => {
    const entry = `must be a plugin file (relative to this config file's folder), or {"path": FILE, "options": {…}}`;
    expect(problemsOf({ plugins: { paths: [5] } })).toEqual([`plugins.paths[0]: ${entry}`]);
    expect(problemsOf({ plugins: { paths: ['a.mjs', { file: 'b.mjs' }] } })).toEqual([`plugins.paths[1]: ${entry}`]);
    // An object entry is told what is wrong in it, not also the shape line; a misspelt key is named.
    expect(problemsOf({ plugins: { paths: [{ path: 'b.mjs', options: 3 }] } })).toEqual(['plugins.paths[0].options: must be an object (the options handed to this plugin)']);
    expect(problemsOf({ plugins: { paths: [{ pth: 'b.mjs' }] } })).toEqual(['plugins.paths[0].pth: unknown key: did you mean "path"? (expected one of: path, options)']);
    expect(problemsOf({ plugins: { paths: [{ path: 'b.mjs', optons: {} }] } })).toEqual(['plugins.paths[0].optons: unknown key: did you mean "options"? (expected one of: path, options)']);
    const oauth = { issuer: 'https://issuer.test', jwksUri: 'https://issuer.test/jwks', toolScopes: { 'a*': 5, b: [], c: 'read', d: ['read', 'write'] } };
    expect(problemsOf({ auth: { oauth } })).toEqual(['auth.oauth.toolScopes.a*: must be a scope (several separated by single spaces), or an array of one or more scopes; a scope is visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token)', 'auth.oauth.toolScopes.b: must be a scope (several separated by single spaces), or an array of one or more scopes; a scope is visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token)']);
    // Values of one schema node, each wrong in a shape of its own: each said once, none hiding another's.
    const mixed = { ...oauth, toolScopes: { s: '', l: [''], ok: 'read' } };
    expect(problemsOf({ auth: { oauth: mixed } })).toEqual(['auth.oauth.toolScopes.s: must be a scope (several separated by single spaces), or an array of one or more scopes; a scope is visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token)', 'auth.oauth.toolScopes.l[0]: must be a scope (several separated by single spaces), or an array of one or more scopes; a scope is visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token)']);
    // A scope no token can carry (a space in an item, a quote the challenge cannot name) is refused:
    // its 403 sent the client to log in again and again. A string of single-space-separated scopes is several.
    const M = 'must be a scope (several separated by single spaces), or an array of one or more scopes; a scope is visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token)';
    const spaced = { ...oauth, toolScopes: { two: 'files write', item: ['files write'], quoted: 'a"b', ok: ['read'] }, scopes: ['base scope'] };
    expect(problemsOf({ auth: { oauth: spaced } })).toEqual([
      'auth.oauth.scopes[0]: must be one scope: visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token); give several as several items',
      `auth.oauth.toolScopes.item[0]: ${M}`,
      `auth.oauth.toolScopes.quoted: ${M}`,
    ]);
    expect(problemsOf({ auth: { apiKeys: [{ principal: 'bob', sha256: 'a'.repeat(64), scopes: ['a b'] }] } })).toEqual([
      'auth.apiKeys[0].scopes[0]: must be one scope: visible ASCII without spaces, quotes or backslashes (RFC 6749 scope-token); give several as several items',
    ]);
    // A misspelt key of an object with required keys is that one mistake: not also "perSecond is required".
    expect(problemsOf({ policy: { rateLimit: { perPrincipal: { burst: 1, perSecnd: 1 } } } })).toEqual(['policy.rateLimit.perPrincipal.perSecnd: unknown key: did you mean "perSecond"? (expected one of: burst, perSecond)']);
  });

  it('refuses an API key limited to a group the config has not (it could use no endpoint)', () => {
    const key = (groups: unknown) => ({ auth: { apiKeys: [{ principal: 'bob', sha256: 'a'.repeat(64), groups }] }, groups: { small: { servers: ['a'] } }, servers: { a: { command: 'x' } } });
    expect(problemsOf(key(['small', 'smal']))).toEqual(['auth.apiKeys[0].groups: "smal" is not a configured group (small)']);
    expect(problemsOf(key([]))).toEqual([expect.stringMatching(/^auth\.apiKeys\[0\]\.groups: /)]);
    expect(parseConfig(key(['small']), undefined, NO_ENV).auth?.apiKeys[0]?.groups).toEqual(['small']);
  });

  it("says what the hub has instead of keys other clients put in a server entry (a Cline or Roo Code entry pasted into mcpServers)", () => {
    const p = problemsOf({ mcpServers: { fs: { command: 'x', timeout: 60, alwaysAllow: ['read'], autoApprove: ['read_file'], transportType: 'stdio', serverUrl: 'http://h/mcp', disabledTools: ['w'], envFile: '.env' } } });
    expect(p).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^mcpServers\.fs\.timeout: unknown key: .*timeoutMs, in milliseconds$/),
        expect.stringMatching(/^mcpServers\.fs\.alwaysAllow: unknown key: .*policy\.confirm/),
        expect.stringMatching(/^mcpServers\.fs\.autoApprove: must be true or false: .*Cline's autoApprove/),
        expect.stringMatching(/^mcpServers\.fs\.transportType: unknown key: type says/),
        expect.stringMatching(/^mcpServers\.fs\.serverUrl: unknown key: url is/),
        expect.stringMatching(/^mcpServers\.fs\.disabledTools: unknown key: tools\.deny/),
        expect.stringMatching(/^mcpServers\.fs\.envFile: unknown key: the hub reads no env file/),
      ]),
    );
    expect(p).toHaveLength(7);
    // Elsewhere such a key is an ordinary unknown one.
    expect(problemsOf({ listen: { timeout: 1 } })).toEqual([expect.stringMatching(/^listen\.timeout: unknown key \(expected one of: host/)]);
  });

  // Windsurf's entry names its address serverUrl: 'must have exactly one of "command" or "url"'
  // came too, the same mistake said twice. A VS Code file's inputs got the bare key list.
  it("says a Windsurf entry's serverUrl once, and what VS Code's inputs are here", () => {
    expect(problemsOf({ mcpServers: { w: { serverUrl: 'http://h/mcp' } } })).toEqual(['mcpServers.w.serverUrl: unknown key: url is the address of an HTTP server']);
    expect(problemsOf({ servers: {}, inputs: [{ id: 'tok', type: 'promptString' }] })).toEqual([
      'inputs: unknown key: VS Code\'s prompts for values: the hub prompts for none; set an environment variable and write "${env:NAME}" where the file says "${input:ID}", and remove inputs',
    ]);
  });

  it('says only "must be object" for a server that is not an object', () => {
    expect(problemsOf({ servers: { s: 'node server.js' } })).toEqual(['servers.s: must be object']);
    expect(problemsOf([])).toEqual(['config: must be object']);
    expect(problemsOf(null)).toEqual(['config: must be object']);
  });

  it('keeps inheritEnv as written (true, false, names) and refuses names that cannot be ones', () => {
    const c = parseConfig({ servers: { a: { command: 'x', inheritEnv: ['AWS_*', 'NODE_OPTIONS'] }, b: { command: 'x', inheritEnv: true }, d: { command: 'x', inheritEnv: false }, e: { command: 'x' } } });
    expect([c.servers.a!.inheritEnv, c.servers.b!.inheritEnv, c.servers.d!.inheritEnv, c.servers.e!.inheritEnv]).toEqual([['AWS_*', 'NODE_OPTIONS'], true, false, undefined]);
    for (const bad of [['*'], ['A=B'], ['A*B'], 'PATH', ['X', 'X']]) expect(configProblems({ servers: { a: { command: 'x', inheritEnv: bad } } }), JSON.stringify(bad)).not.toEqual([]);
    // Said in words: not "must be boolean" and "must be array" for one value, nor a regular expression.
    const whole = 'servers.a.inheritEnv: must be true, false, or an array of distinct variable names (NAME, or PREFIX* for every name starting with PREFIX)';
    expect(configProblems({ servers: { a: { command: 'x', inheritEnv: 'PATH' } } })).toEqual([whole]);
    expect(configProblems({ servers: { a: { command: 'x', inheritEnv: ['X', 'X'] } } })).toEqual([whole]);
    // One bad name is one line: the name's, not also the whole value's (it is an array, as asked).
    const name = 'a variable name: NAME, or PREFIX* (no "=", and "*" only at the end of a prefix)';
    expect(configProblems({ servers: { a: { command: 'x', inheritEnv: ['A=B'] } } })).toEqual([`servers.a.inheritEnv[0]: ${name}`]);
    expect(configProblems({ servers: { a: { command: 'x', inheritEnv: ['*'] } } })).toEqual([`servers.a.inheritEnv[0]: ${name}`]);
  });

  it('refuses a server id longer than a prefix may be when it is the prefix (no "prefix" given), in either servers key', () => {
    const long = `fs-${'x'.repeat(46)}`; // 49 characters
    const at48 = long.slice(0, 48);
    const problem = (key: string) =>
      `${key}.${long}: the id is its tool and prompt names' prefix when no "prefix" is given, and at 49 characters it is longer than a prefix may be (48: names are at most 64, and would be cut to a hash); give the server a shorter "prefix"`;
    expect(problemsOf({ servers: { [long]: { command: 'x' }, [at48]: { command: 'x' } } })).toEqual([problem('servers')]);
    expect(problemsOf({ mcpServers: { [long]: { command: 'x' } } })).toEqual([problem('mcpServers')]);
    expect(parseConfig({ servers: { [long]: { command: 'x', prefix: 'fs' }, [at48]: { command: 'x' } } }, undefined, NO_ENV).servers[long]?.prefix).toBe('fs');
    expect(parseConfig({ servers: { [long]: { command: 'x', prefix: '' } } }, undefined, NO_ENV).servers[long]?.prefix).toBe('');
    // A prefix written out is bounded alike, and the message says so.
    expect(problemsOf({ servers: { a: { command: 'x', prefix: 'p'.repeat(49) } } })).toEqual([`servers.a.prefix: ${PREFIX_ERROR}`]);
  });

  it('checks values: enums, ranges, array items, durations, prefixes, regexes, reserved sections', () => {
    expect(
      problemsOf({
        listen: { port: 70000, maxBodyBytes: 0 },
        ledger: { idempotencyTtl: '1 day', redactKeys: '(' },
        names: { mode: 'loose' },
        pageSize: 0,
        servers: {
          a: { command: 'x', args: ['ok', 3], trust: 'maybe', era: '2024-11-05', prefix: 'my.prefix', url: undefined },
          b: { url: 'ftp://x' },
          c: { command: 'x', tools: { allow: 'all', t: { annotations: { readOnlyHint: 'yes' } } } },
        },
        plugins: [],
      }),
    ).toEqual([
      'listen.port: must be <= 65535',
      'listen.maxBodyBytes: must be >= 1',
      'ledger.idempotencyTtl: must be a whole number of milliseconds or a duration such as "24h", "30m", "90s"',
      'names.mode: must be one of "strict", "spec"',
      'pageSize: must be >= 1',
      'servers.a.args[1]: must be string',
      `servers.a.prefix: ${PREFIX_ERROR}`,
      'servers.a.trust: must be one of "trusted", "untrusted"',
      'servers.a.era: must be one of "auto", "2025-11-25", "2026-07-28"',
      'servers.b.url: must be an http:// or https:// URL (or begin with ${env:NAME})',
      'servers.c.tools.t.annotations.readOnlyHint: must be boolean',
      'servers.c.tools.allow: must be array',
      'plugins: must be object',
      'ledger.redactKeys: not a valid regular expression (Invalid regular expression: /(/i: Unterminated group)',
    ]);
  });

  it("refuses a prefix that would reach into another prefix's names: __ inside, _ at either end", () => {
    const problems = (prefix: string) => configProblems({ servers: { a: { command: 'x', prefix } } });
    for (const bad of ['a__b', '_a', 'a_', '__', '_', 'a___b']) expect(problems(bad), bad).toEqual([`servers.a.prefix: ${PREFIX_ERROR}`]);
    for (const good of ['', 'a', 'a_b', 'a-b', 'A9', 'a_b-c_d', '-a-']) expect(problems(good), good).toEqual([]);
  });

  it('refuses a timeout longer than a Node.js timer holds: such a timer fires at once, and every request would time out', () => {
    const month = 30 * 24 * 3_600_000; // 2592000000 ms, past 2^31 - 1
    expect(
      problemsOf({
        listen: { drainTimeoutMs: month },
        policy: { inputTimeoutMs: month, requestStateTtlMs: month },
        servers: { a: { command: 'x', timeoutMs: month, maxTotalTimeoutMs: month, probeTimeoutMs: month, circuitBreaker: { cooldownMs: month } } },
      }),
    ).toEqual([
      'listen.drainTimeoutMs: must be <= 2147483647',
      'servers.a.timeoutMs: must be <= 2147483647',
      'servers.a.maxTotalTimeoutMs: must be <= 2147483647',
      // Not a timeout, but a timer all the same: an open circuit was probed again at once.
      'servers.a.circuitBreaker.cooldownMs: must be <= 2147483647',
      'servers.a.probeTimeoutMs: must be <= 2147483647',
      'policy.inputTimeoutMs: must be <= 2147483647',
    ]);
    const longest = 2 ** 31 - 1;
    expect(configProblems({ servers: { a: { command: 'x', timeoutMs: longest, maxTotalTimeoutMs: longest } } })).toEqual([]);
  });

  it('refuses a ledger.redactKeys of catastrophic shape: it runs on every key clients send', () => {
    expect(problemsOf({ ledger: { redactKeys: '(a+)+$' } })).toEqual(['ledger.redactKeys: nested repetition (a repeated group that itself repeats), which can backtrack without end on a hostile key']);
    expect(configProblems({ ledger: { redactKeys: '(pass(word)?|secret|token)' } }, NO_ENV)).toEqual([]);
  });

  it('checks the types of every policy key, and refuses one it does not know (a typo would be ignored)', () => {
    expect(configProblems({ policy: { confirm: ['fs__write_*'], confirmDestructive: true, inputTimeoutMs: 30000, requestStateTtlMs: 600000, requestStateKey: `${'k'.repeat(43)}=` } }, NO_ENV)).toEqual([]);
    expect(configProblems({ policy: { confirmDestructive: 'true' } }, NO_ENV)).toEqual(['policy.confirmDestructive: must be boolean']);
    expect(configProblems({ policy: { inputTimeoutMs: '60s' } }, NO_ENV)).toEqual(['policy.inputTimeoutMs: must be integer, in milliseconds: 60000 for "60s"']);
    expect(configProblems({ policy: { confirm: 'fs__write_*' } }, NO_ENV)).toEqual(['policy.confirm: must be array']);
    expect(configProblems({ policy: { requestStateTtlMs: 0 } }, NO_ENV)).toEqual(['policy.requestStateTtlMs: must be >= 1']);
    // A requestState that expires before the client's time to answer is up.
    expect(configProblems({ policy: { requestStateTtlMs: 30000 } }, NO_ENV)).toEqual([expect.stringMatching(/^policy\.requestStateTtlMs \(30000\) is shorter than policy\.inputTimeoutMs \(60000\)/)]);
    expect(configProblems({ policy: { inputTimeoutMs: 700000 } }, NO_ENV)).toEqual([expect.stringMatching(/^policy\.requestStateTtlMs \(600000\) is shorter than policy\.inputTimeoutMs \(700000\)/)]);
    expect(configProblems({ policy: { poisioning: 'block' } }, NO_ENV)).toEqual([expect.stringMatching(/^policy.poisioning: unknown key/)]);
    // A key start refuses (not 32 bytes) is refused here too, so config validate passes no config start refuses; its value is not said.
    const badKey = 'policy.requestStateKey: must be 32 bytes, written as 64 hex characters or in base64 (such as the output of `openssl rand -base64 32`)';
    expect(configProblems({ policy: { requestStateKey: 'short-secret' } }, NO_ENV)).toEqual([badKey]);
    expect(configProblems({ policy: { requestStateKey: '${env:SK}' } }, { SK: 'ab'.repeat(31) })).toEqual([badKey]);
    expect(configProblems({ policy: { requestStateKey: 'ab'.repeat(32) } }, NO_ENV)).toEqual([]);
    expect(configProblems({ policy: { requestStateKey: Buffer.alloc(32, 7).toString('base64') } }, NO_ENV)).toEqual([]);
  });

  it('configProblems returns the same lines, and nothing for a valid document', () => {
    expect(configProblems({ pageSize: 'x' }, NO_ENV)).toEqual(['pageSize: must be integer']);
    expect(configProblems({ servers: { a: { command: 'x' } } }, NO_ENV)).toEqual([]);
  });

  it('puts every problem on its own line of the error message', () => {
    try {
      parseConfig({ pageSize: 'x', listen: { port: -1 } }, '/x/hub.json', NO_ENV);
      throw new Error('expected a ConfigError');
    } catch (e) {
      expect((e as Error).message).toBe('invalid config /x/hub.json:\n  listen.port: must be >= 0\n  pageSize: must be integer');
    }
  });
});

describe('${env:NAME} interpolation', () => {
  it('replaces references in every string value', () => {
    const env = { TOKEN: 's3cr3t', HOST: 'api.example.test', DIR: 'tmp', HOME_DIR: '/home/u' };
    const c = parseConfig(
      {
        ledger: { path: '${env:HOME_DIR}/ledger.db' },
        servers: {
          github: { url: 'https://${env:HOST}/mcp', headers: { Authorization: 'Bearer ${env:TOKEN}' } },
          local: { command: 'node', args: ['--dir=${env:DIR}', '${env:DIR}${env:DIR}'], env: { API_KEY: '${env:TOKEN}' } },
        },
      },
      undefined,
      env,
    );
    expect(c.ledger.path).toBe('/home/u/ledger.db');
    expect(c.servers.github.url).toBe('https://api.example.test/mcp');
    expect(c.servers.github.headers.Authorization).toBe('Bearer s3cr3t');
    expect(c.servers.local.args).toEqual(['--dir=tmp', 'tmptmp']);
    expect(c.servers.local.env).toEqual({ API_KEY: 's3cr3t' });
  });

  it('names the key path and the variable when one is missing, and nothing else about it', () => {
    expect(
      problemsOf({ servers: { github: { url: '${env:GH_URL}', headers: { Authorization: 'Bearer ${env:GITHUB_TOKEN}' } } } }, {}),
    ).toEqual([
      'servers.github.url: environment variable GH_URL is not set',
      'servers.github.headers.Authorization: environment variable GITHUB_TOKEN is not set',
    ]);
    expect(problemsOf({ servers: { a: { command: 'x', args: ['${env:lower-case}', '${env:}'] } } }, {})).toEqual([
      'servers.a.args[0]: "${env:lower-case}" is not a valid environment variable reference',
      'servers.a.args[1]: "${env:}" is not a valid environment variable reference',
    ]);
    // A literal credential that holds "${env:" is no reference: quoted redacted, and cut.
    const leaked = problemsOf({ servers: { a: { command: 'x', args: ['--key=${env:sk-ant-abcdefghijklmnopqrstuvwxyz0123}', 'p4ss${env:Qz7-hunter2-Xy9-kk8-Lm3-Pw5-Rt6-Vb1-Nc4}'] } } }, {});
    expect(leaked).toEqual([
      'servers.a.args[0]: "${env:[redacted:api-key]}" is not a valid environment variable reference',
      'servers.a.args[1]: "${env:Qz7-hunter2-Xy9-kk8-Lm3-Pw5-Rt6…}" is not a valid environment variable reference',
    ]);
    // A reference left open (a typo): its text went to the server as it was, "Bearer ${env:TOKEN".
    expect(problemsOf({ servers: { a: { url: 'https://x.test/mcp', headers: { Authorization: 'Bearer ${env:TOKEN', 'X-Other': '${env:TOKEN} ${env:' } } } }, { TOKEN: 's3cr3t-value' })).toEqual([
      'servers.a.headers.Authorization: a "${env:" reference has no closing "}"',
      'servers.a.headers.X-Other: a "${env:" reference has no closing "}"',
    ]);
    // Escaped ($$), or no env reference at all, it is text, left as it is.
    expect(parseConfig({ servers: { a: { command: 'x', args: ['$${env:X', 'a${b'] } } }, undefined, {}).servers.a.args).toEqual(['$${env:X', 'a${b']);
  });

  it('treats $${env:X} as a literal ${env:X}, and leaves other ${...} alone', () => {
    const c = parseConfig(
      { servers: { a: { command: 'x', args: ['$${env:X}', '${input:token}', '$$', 'a$b'] } } },
      undefined,
      { X: 'no' },
    );
    expect(c.servers.a.args).toEqual(['${env:X}', '${input:token}', '$$', 'a$b']);
  });

  it('reads process.env by default', () => {
    process.env.SWITCHYARD_TEST_CMD = 'from-process-env';
    try {
      expect(parseConfig({ servers: { a: { command: '${env:SWITCHYARD_TEST_CMD}' } } }).servers.a.command).toBe('from-process-env');
    } finally {
      delete process.env.SWITCHYARD_TEST_CMD;
    }
  });

  it('a variable named as a property of every object (toString, constructor, __proto__) is not set unless the environment has it', () => {
    const json = { servers: { a: { command: '${env:toString}', args: ['${env:constructor}', '${env:__proto__}', '${env:valueOf}'] } } };
    const unset = ['servers.a.command: environment variable toString is not set', ...['constructor', '__proto__', 'valueOf'].map((n, i) => `servers.a.args[${i}]: environment variable ${n} is not set`)];
    expect(problemsOf(json, {})).toEqual(unset);
    expect(problemsOf(json, process.env)).toEqual(unset);
    expect(parseConfig(json, undefined, { toString: 't', constructor: 'c', ['__proto__']: 'p', valueOf: 'v' }).servers.a).toMatchObject({ command: 't', args: ['c', 'p', 'v'] });
  });

  it('never puts an interpolated secret into a problem', () => {
    const p = problemsOf({ servers: { a: { url: '${env:SECRET}', headers: { Authorization: 3 } } } }, { SECRET: 'hunter2-secret' });
    expect(p).toEqual(['servers.a.url: must be an http:// or https:// URL (or begin with ${env:NAME})', 'servers.a.headers.Authorization: must be string']);
    expect(p.join('\n')).not.toContain('hunter2');
  });

  it('keeps "__proto__" a plain key of a string map', () => {
    const json = JSON.parse('{"servers":{"a":{"command":"x","env":{"__proto__":"v"}}}}');
    const c = parseConfig(json, undefined, NO_ENV);
    expect(Object.getOwnPropertyNames(c.servers.a.env)).toEqual(['__proto__']);
    expect(Object.getPrototypeOf(c.servers.a.env)).toBe(Object.prototype);
  });
});

describe('loadConfig', () => {
  const dir = mkdtempSync(join(tmpdir(), 'switchyard-config-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads a file (with a byte-order mark) and resolves paths against its folder', () => {
    const file = join(dir, 'hub.config.json');
    writeFileSync(file, '\uFEFF' + JSON.stringify({ ledger: { path: 'l.db' }, servers: { a: { command: 'x', cwd: '.' } } }));
    const c = loadConfig(file, NO_ENV);
    expect(c.file).toBe(file);
    expect(c.ledger.path).toBe(join(dir, 'l.db'));
    expect(c.servers.a.cwd).toBe(dir);
  });

  it('reports a missing file', () => {
    expect(() => loadConfig(join(dir, 'nope.json'))).toThrow(/config: cannot read .*nope\.json \(ENOENT\)/);
  });

  it('reports where the JSON is broken without quoting the file', () => {
    // The wording after the position is V8's and varies between Node versions.
    const cases: [string, RegExp][] = [
      ['{\n  "servers": {,\n}', /^config: not valid JSON \(line 2 column 15: [^"]+\)$/],
      ['{"headers": {"Authorization": Bearer-hunter2}}', /^config: not valid JSON \(unexpected character 'B'\)$/],
      ['{"token": "hunter2', /^config: not valid JSON \(line 1 column 19: [^"]+\)$/],
      ['', /^config: not valid JSON \(unexpected end of input\)$/],
    ];
    for (const [text, problem] of cases) {
      const file = join(dir, 'broken.json');
      writeFileSync(file, text);
      let err: ConfigError | undefined;
      try {
        loadConfig(file, NO_ENV);
      } catch (e) {
        err = e as ConfigError;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect(err!.problems).toHaveLength(1);
      expect(err!.problems[0]).toMatch(problem);
      expect(err!.message).not.toContain('hunter2');
    }
  });

  // A config pasted from VS Code's or Cursor's mcp.json (JSONC) holds comments and trailing
  // commas: V8 said "Expected double-quoted property name", or, for a comma before "]", gave no
  // position at all ("unexpected character ']'").
  it('names a comment or a trailing comma, where it is, and what to do', () => {
    const cases: [string, string][] = [
      ['{\n  // my servers\n  "servers": {}\n}', 'line 2 column 3: a comment, which JSON does not allow: remove it'],
      ['{\n  "servers": {} /* later */\n}', 'line 2 column 17: a comment, which JSON does not allow: remove it'],
      ['{\n  "servers": {\n    "a": { "command": "x", "env": { "TOKEN": "hunter2" }, },\n  }\n}', "line 3 column 57: a trailing comma before '}', which JSON does not allow: remove it"],
      ['{"servers": {"a": {"command": "x", "args": ["hunter2", "b",]}}}', "line 1 column 59: a trailing comma before ']', which JSON does not allow: remove it"],
      // Inside a string neither is one; the first mistake outside one is the one named.
      ['{"servers": {"a": {"url": "http://h/a,}", "args": ["//x"],}}}', "line 1 column 58: a trailing comma before '}', which JSON does not allow: remove it"],
      // A byte-order mark is no column.
      ['\uFEFF{"servers": {},}', "line 1 column 15: a trailing comma before '}', which JSON does not allow: remove it"],
      // An earlier mistake of another kind is the one V8 stopped at: it is named, not the comma.
      ['{"servers": {"a" 1, "b": [1,]}}', 'line 1 column 18: '],
    ];
    for (const [text, where] of cases) {
      const file = join(dir, 'jsonc.json');
      writeFileSync(file, text);
      let err: ConfigError | undefined;
      try {
        loadConfig(file, NO_ENV);
      } catch (e) {
        err = e as ConfigError;
      }
      expect(err).toBeInstanceOf(ConfigError);
      expect(err!.problems).toEqual([expect.stringMatching(new RegExp(`^config: not valid JSON \\(${where.replace(/[()[\]{}.*+?^$|\\]/g, '\\$&')}`))]);
      expect(err!.message).not.toContain('hunter2');
    }
  });
});

describe('URLs', () => {
  it('a URL that cannot be connected to is a problem at its key path, and is never repeated (it may hold credentials)', () => {
    const problems = problemsOf({
      servers: {
        spaced: { url: 'http://user:SECRETPW@exa mple.com/mcp?token=SECRETQ' },
        empty: { url: 'https://' },
        fine: { url: 'http://127.0.0.1:9/mcp' },
        fromEnv: { url: '${env:UPSTREAM_URL}' },
      },
      auth: { oauth: { issuer: 'i', audience: 'http://a b/mcp', jwksUri: 'https://keys.example/jwks' } },
    }, { UPSTREAM_URL: 'http://[::1/mcp' });
    expect(problems).toEqual([
      'servers.spaced.url: not a valid http(s) URL',
      'servers.empty.url: not a valid http(s) URL',
      'servers.fromEnv.url: not a valid http(s) URL',
      'auth.oauth.audience: not a valid http(s) URL',
    ]);
    expect(problems.join('\n')).not.toMatch(/SECRET|::1|a b/);
  });
});

describe('upstream headers', () => {
  it('a name or value undici would refuse at each request is a problem at load, and a value is never repeated', () => {
    const problems = problemsOf(
      JSON.parse(`{"servers": {
        "a": { "url": "http://127.0.0.1:9/mcp", "headers": {
          "Bad Name": "x", "X-Token": "\${env:WRAPPED}", "X-Bell": "one\\u0007two", "X-Wide": "caf\\u00e9 \\u2603",
          "__proto__": "v", "Authorization": "Bearer \${env:TOKEN}", "authorization": "Bearer dup", "Authorization: Bearer SECRET-three": "", "": "x" } },
        "b": { "url": "http://127.0.0.1:9/mcp", "credentials": { "alice": { "headers": {
          "Content-Length": "5", "Mcp-Session-Id": "s", "mcp-param-region": "eu", "Host": "api.example", "X-Tab": "a\\tb" } } } }
      }}`),
      { WRAPPED: 'SECRET-one\r\nX-Injected: yes', TOKEN: 'SECRET-two' },
    );
    expect(problems).toEqual([
      'servers.a.headers.Bad…: not a valid HTTP header name (character 4, " ", cannot be in one)',
      'servers.a.headers.X-Token: the value holds a character a header cannot carry (a line break, a control character, or one above U+00FF)',
      'servers.a.headers.X-Bell: the value holds a character a header cannot carry (a line break, a control character, or one above U+00FF)',
      'servers.a.headers.X-Wide: the value holds a character a header cannot carry (a line break, a control character, or one above U+00FF)',
      'servers.a.headers.__proto__: this name cannot be sent as a header',
      'servers.a.headers.authorization: the same header as "Authorization" (header names ignore case)',
      // A header line pasted as the name: the value after the colon (a token) is not repeated either.
      'servers.a.headers.Authorization…: not a valid HTTP header name (character 14, ":", cannot be in one: give the name as the key and what follows the colon as its value)',
      'servers.a.headers."": not a valid HTTP header name (it is empty)',
      'servers.b.credentials.alice.headers.Content-Length: set by the hub on each request; it cannot be configured',
      'servers.b.credentials.alice.headers.Mcp-Session-Id: set by the hub on each request; it cannot be configured',
      'servers.b.credentials.alice.headers.mcp-param-region: set by the hub on each request; it cannot be configured',
    ]);
    expect(problems.join('\n')).not.toMatch(/SECRET|Injected|dup/);
  });

  it('credentials on a stdio server are a problem: one process serves every principal', () => {
    const problems = problemsOf({ servers: { s: { command: 'node', credentials: { alice: { headers: { 'X-Token': 'a' } } } }, h: { url: 'http://127.0.0.1:9/mcp', credentials: { alice: { headers: { 'X-Token': 'a' } } } } } });
    expect(problems).toEqual([expect.stringMatching(/^servers\.s\.credentials: per-principal credentials are headers sent to an HTTP upstream/)]);
  });

  it('takes servers.<id>.oauth on a url server, and says what it cannot go with', () => {
    const url = 'http://127.0.0.1:9/mcp';
    const c = parseConfig({ servers: { h: { url, oauth: { clientId: 'hub', clientSecret: 'client-secret-1', scopes: ['mcp:read'] } } } }, undefined, NO_ENV);
    expect(c.servers.h!.oauth).toEqual({ clientId: 'hub', clientSecret: 'client-secret-1', scopes: ['mcp:read'] });
    const problems = problemsOf({
      servers: {
        s: { command: 'node', oauth: { clientId: 'hub', clientSecret: 'sssssssss' } },
        a: { url, headers: { authorization: 'Bearer x' }, oauth: { clientId: 'hub', clientSecret: 'sssssssss' } },
        p: { url, credentials: { alice: { headers: { 'X-Token': 'a' } } }, oauth: { clientId: 'hub', clientSecret: 'sssssssss' } },
        n: { url, oauth: { clientId: 'hub' } },
        j: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss', tokenEndpointAuth: 'private_key_jwt' } },
        q: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss', scopes: ['two words'] } },
      },
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^servers\.s\.oauth: OAuth is for an HTTP upstream/),
        expect.stringMatching(/^servers\.a\.oauth: the server also has an Authorization header/),
        expect.stringMatching(/^servers\.p\.oauth: per-principal credentials cannot go with oauth/),
        expect.stringMatching(/oauth needs clientSecret or privateKey/),
        expect.stringMatching(/private_key_jwt.*needs oauth\.privateKey/),
        expect.stringMatching(/^servers\.q\.oauth\.scopes/),
      ]),
    );
    expect(problems.join('\n')).not.toContain('sssssssss');
  });

  it('takes oauth.grant "authorization_code" (a user\'s login), with its token file in the state directory, and refuses what does not go with it', () => {
    const url = 'http://127.0.0.1:9/mcp';
    const c = parseConfig({ ledger: { path: '/var/lib/sy/ledger.db' }, servers: { u: { url, oauth: { grant: 'authorization_code', scopes: ['mcp'] } }, m: { url, oauth: { grant: 'authorization_code', clientMetadataUrl: 'https://hub.example/client.json', redirectPort: 7633 } } } }, undefined, NO_ENV);
    expect(c.servers.u!.oauth).toEqual({ grant: 'authorization_code', scopes: ['mcp'] });
    expect(c.servers.u!.oauthTokenFile).toBe('/var/lib/sy/oauth-tokens/u.json');
    expect(c.servers.m!.oauth?.clientMetadataUrl).toBe('https://hub.example/client.json');
    // The client-credentials grant has no token file: its tokens live in memory only.
    expect(parseConfig({ servers: { h: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss' } } } }, undefined, NO_ENV).servers.h!.oauthTokenFile).toBeUndefined();
    const problems = problemsOf({
      servers: {
        k: { url, oauth: { grant: 'authorization_code', clientId: 'hub', privateKey: 'pem' } },
        s: { url, oauth: { grant: 'authorization_code', clientSecret: 'sssssssss' } },
        b: { url, oauth: { grant: 'authorization_code', clientId: 'hub', tokenEndpointAuth: 'client_secret_basic' } },
        n: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss', tokenEndpointAuth: 'none' } },
        r: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss', redirectPort: 7633 } },
        i: { url, oauth: { clientSecret: 'sssssssss' } },
        h: { url, oauth: { grant: 'authorization_code', clientMetadataUrl: 'http://hub.example/client.json' } },
        // An assertion's audience is for private_key_jwt alone, and one of two names.
        aa: { url, oauth: { grant: 'authorization_code', assertionAudience: 'issuer' } },
        as: { url, oauth: { clientId: 'hub', clientSecret: 'sssssssss', assertionAudience: 'token_endpoint' } },
        ax: { url, oauth: { clientId: 'hub', privateKey: 'pem', assertionAudience: 'https://as.example/token' } },
      },
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^servers\.k\.oauth.*takes no privateKey or signingAlgorithm/),
        expect.stringMatching(/^servers\.s\.oauth.*clientSecret needs oauth\.clientId/),
        expect.stringMatching(/^servers\.b\.oauth.*client_secret_basic.*needs oauth\.clientSecret/),
        expect.stringMatching(/^servers\.n\.oauth.*"none" is for grant "authorization_code"/),
        expect.stringMatching(/^servers\.r\.oauth.*redirectPort are for grant "authorization_code"/),
        expect.stringMatching(/^servers\.i\.oauth.*needs clientId/),
        expect.stringMatching(/^servers\.h\.oauth\.clientMetadataUrl/),
        expect.stringMatching(/^servers\.aa\.oauth.*assertionAudience is for private_key_jwt client assertions, of the client_credentials grant/),
        expect.stringMatching(/^servers\.as\.oauth.*assertionAudience is for private_key_jwt client assertions: it needs oauth\.privateKey/),
        expect.stringMatching(/^servers\.ax\.oauth\.assertionAudience/),
      ]),
    );
    expect(parseConfig({ servers: { j: { url, oauth: { clientId: 'hub', privateKey: 'pem', assertionAudience: 'token_endpoint' } } } }, undefined, NO_ENV).servers.j!.oauth?.assertionAudience).toBe('token_endpoint');
    expect(problems.join('\n')).not.toContain('sssssssss');
  });

  it('refuses every header the hub sets itself, in any case, in mcpServers too', () => {
    const own = ['Accept', 'content-type', 'Content-Length', 'Transfer-Encoding', 'Connection', 'Keep-Alive', 'Upgrade', 'TE', 'Trailer', 'Expect'];
    const mcp = ['MCP-Protocol-Version', 'Mcp-Method', 'Mcp-Name', 'Mcp-Session-Id', 'Last-Event-ID', 'Mcp-Param-Region'];
    const headers = Object.fromEntries([...own, ...mcp].map((h) => [h, 'x']));
    expect(problemsOf({ mcpServers: { a: { url: 'http://127.0.0.1:9/mcp', headers } } })).toEqual(
      [...own, ...mcp].map((h) => `mcpServers.a.headers.${h}: set by the hub on each request; it cannot be configured`),
    );
  });

  it('odd shapes are the schema\'s problems, not a crash of the header check', () => {
    const problems = problemsOf({
      servers: {
        a: { url: 'http://127.0.0.1:9/mcp', headers: null },
        b: { url: 'http://127.0.0.1:9/mcp', credentials: { alice: null, bob: { headers: ['x'] } } },
        c: null,
      },
    });
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.every((p) => !/header name|cannot carry|set by the hub/.test(p))).toBe(true);
  });

  it('ordinary headers pass, Host and latin-1 text included', () => {
    const c = parseConfig(
      { servers: { a: { url: 'http://127.0.0.1:9/mcp', headers: { Authorization: 'Bearer ${env:T}', 'X-Api-Key': 'k', Host: 'api.example', 'X-Name': 'caf\u00e9\tb' } } } },
      undefined,
      { T: 'tok' },
    );
    expect(c.servers.a.headers).toEqual({ Authorization: 'Bearer tok', 'X-Api-Key': 'k', Host: 'api.example', 'X-Name': 'caf\u00e9\tb' });
  });
});

describe('keys given twice', () => {
  it('are a problem at their path (JSON.parse would keep the last silently); values are never quoted', () => {
    expect(duplicateKeys('{"servers":{"s":{"command":"a"},"s":{"url":"http://SECRET@x/mcp"}},"listen":{},"listen":{"port":1}}')).toEqual([
      'servers.s: the key appears more than once in its object (remove or rename one)',
      'listen: the key appears more than once in its object (remove or rename one)',
    ]);
    expect(duplicateKeys('{"a":[{"x":1,"x":2},{"x":"\\"}\\\\"}],"b":{"a":1},"c":"{\\"c\\":1,\\"c\\":2}"}')).toEqual(['a[0].x: the key appears more than once in its object (remove or rename one)']);
    expect(duplicateKeys('{"servers":{"a":{"command":"x"},"b":{"command":"x"}},"e":{},"f":[]}')).toEqual([]);
  });

  it('stop loadConfig, naming every one', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-config-twice-')), 'twice.json');
    writeFileSync(file, '{"servers":{"s":{"command":"a"},"s":{"command":"b"}}}');
    expect(() => loadConfig(file)).toThrow(ConfigError);
    try {
      loadConfig(file);
    } catch (e) {
      expect((e as ConfigError).problems).toEqual(['servers.s: the key appears more than once in its object (remove or rename one)']);
    }
  });
});

describe('a config nested absurdly deep', () => {
  it('is a problem, not a crash', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-config-deep-')), 'deep.json');
    writeFileSync(file, `{"x":${'['.repeat(20_000)}${']'.repeat(20_000)}}`);
    expect(() => loadConfig(file)).toThrow(ConfigError);
    try {
      loadConfig(file);
    } catch (e) {
      expect((e as ConfigError).problems).toEqual(['config: nested too deeply']);
    }
  });
});
