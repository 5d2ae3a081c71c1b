/** Client-config import (pure parts): JSON with comments, detection, ids, VS Code variables. */
import { homedir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { detectKind, importClientConfig, ImportError, stripJsonc } from '../../src/config/import-clients.js';
import { configProblems } from '../../src/config/load.js';

describe('stripJsonc', () => {
  it('drops comments and trailing commas but never touches strings', () => {
    const text = `{
      // a comment
      "url": "http://x//y", /* block */ "s": "a /* not */ b, ]",
      "list": [1, 2, /* c */ ],
      "o": { "k": "v", // tail
      },
    }`;
    expect(JSON.parse(stripJsonc(text))).toEqual({ url: 'http://x//y', s: 'a /* not */ b, ]', list: [1, 2], o: { k: 'v' } });
  });

  it('keeps escaped quotes inside strings', () => {
    expect(JSON.parse(stripJsonc('{"a": "say \\"hi\\" // no", }'))).toEqual({ a: 'say "hi" // no' });
  });
});

describe('importClientConfig', () => {
  it('detects the client by key and path', () => {
    expect(detectKind({ servers: {} }, '/w/.vscode/mcp.json')).toBe('vscode');
    expect(detectKind({ mcpServers: {} }, '/home/u/.cursor/mcp.json')).toBe('cursor');
    expect(detectKind({ mcpServers: {} }, '/w/.mcp.json')).toBe('claude-code');
    expect(detectKind({ mcpServers: {} }, '/home/u/.claude.json')).toBe('claude-code');
    expect(detectKind({ mcpServers: {} }, '/x/claude_desktop_config.json')).toBe('claude-desktop');
    expect(detectKind({ mcpServers: {} }, '/c/saoudrizwan.claude-dev/settings/cline_mcp_settings.json')).toBe('cline');
    expect(detectKind({ mcpServers: {} }, '/w/.roo/mcp.json')).toBe('roo-code');
    expect(detectKind({ mcpServers: {} }, '/c/rooveterinaryinc.roo-cline/settings/mcp_settings.json')).toBe('roo-code');
    expect(detectKind({ mcpServers: {} }, '/home/u/.codeium/windsurf/mcp_config.json')).toBe('windsurf');
  });

  // README offers `node /path/to/switchyard/dist/src/cli/main.js` where npx finds none; a clone
  // in a folder of another name was imported, and the hub would have spawned a hub of itself.
  it('skips an entry that runs Switchyard through node and a clone of any name, as it skips npx switchyard', () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          hub: { command: 'node', args: ['/home/me/src/sy/dist/src/cli/main.js', 'stdio', '--config', '/home/me/hub.config.json'] },
          bridge: { command: 'node', args: ['C:\\tools\\hub\\dist\\src\\cli\\main.js', 'connect'] },
          viaNpx: { command: 'npx', args: ['switchyard', 'connect'] },
          other: { command: 'node', args: ['/srv/app/dist/src/cli/main.js', 'serve'] },
        },
      }),
      'claude_desktop_config.json',
    );
    expect(Object.keys(r.servers)).toEqual(['other']);
    for (const n of ['hub', 'bridge', 'viaNpx']) expect(r.notes).toContain(`server "${n}" looks like Switchyard itself and was skipped (the hub would connect to itself).`);
  });

  it("takes Cline's and Roo Code's timeout (seconds) as timeoutMs, and names the hub's names of the tools their client ran without asking", () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          'my fs': { command: 'x', timeout: 120, autoApprove: ['read_file', 'list_dir'] },
          roo: { command: 'y', timeout: 1e12, alwaysAllow: ['search'] },
          none: { command: 'z', timeout: 'soon', autoApprove: [] },
        },
      }),
      '/c/cline_mcp_settings.json',
    );
    expect(r.kind).toBe('cline');
    expect(r.servers['my-fs']).toEqual({ command: 'x', timeoutMs: 120_000 });
    expect(r.servers.roo).toEqual({ command: 'y', timeoutMs: 2_147_483_647 });
    expect(r.servers.none).toEqual({ command: 'z' });
    expect(r.notes.filter((n) => n.includes('without asking'))).toEqual([
      expect.stringMatching(/^server "my fs": .* they are my-fs__read_file, my-fs__list_dir: list those names in the client's entry for the hub/),
      expect.stringMatching(/^server "roo": .* it is roo__search: list that name/),
    ]);
    expect(configProblems({ servers: r.servers }, {})).toEqual([]);
  });

  it('makes unique valid ids and skips entries it cannot use', () => {
    const r = importClientConfig(
      JSON.stringify({ mcpServers: { 'a b': { command: 'x' }, 'a-b': { command: 'y' }, empty: {}, bad: 3, off: { command: 'z', disabled: true } } }),
      '/x/claude_desktop_config.json',
    );
    expect(Object.keys(r.servers)).toEqual(['a-b', 'a-b-2', 'off']);
    expect(r.servers.off).toEqual({ command: 'z', enabled: false });
    expect(r.notes.join('\n')).toMatch(/"empty" was skipped: it has neither a command nor a url/);
    expect(r.notes.join('\n')).toMatch(/"bad" was skipped: not an object/);
  });

  it('keeps ids within a prefix\'s 48 characters, so that the config it writes loads', () => {
    const name = 'io.github.modelcontextprotocol/servers/src/filesystem-for-projects';
    const r = importClientConfig(JSON.stringify({ mcpServers: { [name]: { command: 'x' }, [`${name}!`]: { command: 'y' } } }), '/x/claude_desktop_config.json');
    expect(Object.keys(r.servers)).toEqual(['io-github-modelcontextprotocol-servers-src-files', 'io-github-modelcontextprotocol-servers-src-fil-2']);
    expect(configProblems({ servers: r.servers }, {})).toEqual([]);
  });

  it('turns VS Code inputs into environment references and keeps ${env:…}', () => {
    const r = importClientConfig(
      JSON.stringify({
        inputs: [{ id: 'api.key', type: 'promptString', description: 'The key', password: true }],
        servers: { s: { type: 'stdio', command: 'srv', env: { K: '${input:api.key}', H: '${env:HOME}', U: '${userHome}/x', Q: '${unknownVar}' } } },
      }),
      '/w/.vscode/mcp.json',
    );
    expect(r.servers.s.env).toEqual({ K: '${env:SWITCHYARD_INPUT_API_KEY}', H: '${env:HOME}', U: expect.stringMatching(/\/x$/), Q: '${unknownVar}' });
    expect(r.notes.join('\n')).toMatch(/"api.key" \(The key\): set the environment variable SWITCHYARD_INPUT_API_KEY .*secret/);
    expect(r.notes.join('\n')).toMatch(/"\$\{unknownVar\}" has no hub equivalent/);
  });

  it('refuses what is not a client config', () => {
    expect(() => importClientConfig('not json', 'f.json')).toThrow(ImportError);
    expect(() => importClientConfig('[]', 'f.json')).toThrow(/expected a JSON object/);
    expect(() => importClientConfig('{"x":1}', 'f.json')).toThrow(/no "mcpServers" or "servers"/);
  });

  it("turns Claude Code's ${VAR} and ${VAR:-default} into ${env:VAR}, naming the default it cannot keep", () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          api: { type: 'http', url: '${API_BASE_URL:-https://api.example.com}/mcp', headers: { Authorization: 'Bearer ${API_KEY}' } },
          db: { command: 'db-mcp', args: ['--dsn', '${DB_DSN}'] },
        },
      }),
      '/w/.mcp.json',
    );
    expect(r.servers.api).toEqual({ url: '${env:API_BASE_URL}/mcp', headers: { Authorization: 'Bearer ${env:API_KEY}' } });
    expect(r.servers.db!.args).toEqual(['--dsn', '${env:DB_DSN}']);
    expect(r.notes.join('\n')).toMatch(/set API_BASE_URL before starting it \(the file gave it a default\)/);
    expect(r.notes.join('\n')).not.toContain('api.example.com'); // a default may be a token: never repeated
    expect(r.warnings).toEqual([]); // an env reference already, in the headers and the url
  });

  it("imports the project servers of ~/.claude.json too, saying where they came from", () => {
    const r = importClientConfig(
      JSON.stringify({ mcpServers: { user: { command: 'u' } }, projects: { '/src/app': { mcpServers: { proj: { command: 'p' } } }, '/src/empty': {} } }),
      '/home/u/.claude.json',
    );
    expect(r.kind).toBe('claude-code');
    expect(Object.keys(r.servers)).toEqual(['user', 'proj']);
    expect(r.notes.join('\n')).toMatch(/"proj" comes from the project \/src\/app/);
    expect(importClientConfig(JSON.stringify({ projects: { '/a': { mcpServers: { only: { command: 'o' } } } } }), '/home/u/.claude.json').servers).toEqual({ only: { command: 'o' } });
  });

  it("keeps a project file's stdio servers in the folder their client starts them in, when the hub config is written elsewhere", () => {
    const text = JSON.stringify({ servers: { rel: { type: 'stdio', command: 'node', args: ['server.mjs'] }, sub: { command: 'node', args: ['s.mjs'], cwd: 'tools' }, web: { type: 'http', url: 'http://127.0.0.1:9/mcp' } } });
    const elsewhere = importClientConfig(text, '/src/app/.vscode/mcp.json', '/home/u/hub');
    expect(elsewhere.servers).toEqual({
      rel: { command: 'node', args: ['server.mjs'], cwd: '/src/app' },
      sub: { command: 'node', args: ['s.mjs'], cwd: '/src/app/tools' },
      web: { url: 'http://127.0.0.1:9/mcp' },
    });
    expect(elsewhere.notes.join('\n')).toMatch(/server "rel" runs in \/src\/app as its client started it there/);
    // Written in the workspace itself: the hub's default (the config's folder) is that folder already.
    expect(importClientConfig(text, '/src/app/.vscode/mcp.json', '/src/app').servers.rel).toEqual({ command: 'node', args: ['server.mjs'] });
    const claudeCode = JSON.stringify({ mcpServers: { p: { command: './bin/p' } }, projects: { '/src/other': { mcpServers: { q: { command: 'q' } } } } });
    expect(importClientConfig(claudeCode, '/src/app/.mcp.json', '/home/u').servers.p).toEqual({ command: './bin/p', cwd: '/src/app' });
    expect(importClientConfig(claudeCode, '/home/u/.claude.json', '/home/u').servers).toEqual({ p: { command: './bin/p' }, q: { command: 'q', cwd: '/src/other' } });
    expect(importClientConfig(JSON.stringify({ mcpServers: { c: { command: 'c' } } }), '/src/app/.cursor/mcp.json', '/home/u').servers.c).toEqual({ command: 'c', cwd: '/src/app' });
    // A user-level file names no folder: its entries stay as they are.
    expect(importClientConfig(JSON.stringify({ mcpServers: { d: { command: 'd' } } }), '/x/claude_desktop_config.json', '/home/u').servers.d).toEqual({ command: 'd' });
  });

  it("keeps ${workspaceFolder} of VS Code's user-level mcp.json as text, with a note (it names whatever workspace is open)", () => {
    const text = JSON.stringify({ servers: { s: { type: 'stdio', command: 'node', args: ['${workspaceFolder}/s.mjs'] } } });
    const user = importClientConfig(text, '/home/u/.config/Code/User/mcp.json');
    expect(user.servers.s!.args).toEqual(['${workspaceFolder}/s.mjs']);
    expect(user.notes.join('\n')).toMatch(/the VS Code variable "\$\{workspaceFolder\}" has no hub equivalent and was kept as text/);
    expect(importClientConfig(text, '/src/app/.vscode/mcp.json').servers.s!.args).toEqual(['/src/app/s.mjs']);
  });

  it("resolves Cursor's ${userHome} and a project's ${workspaceFolder}; keeps what it cannot, with a note", () => {
    const project = importClientConfig(JSON.stringify({ mcpServers: { local: { command: 'python', args: ['${workspaceFolder}/server.py', '${userHome}/x', '${env:HOME}'] } } }), '/src/app/.cursor/mcp.json');
    expect(project.servers.local!.args).toEqual(['/src/app/server.py', expect.stringMatching(/\/x$/), '${env:HOME}']);
    expect(project.servers.local!.args![1]).not.toContain('${');
    const global = importClientConfig(JSON.stringify({ mcpServers: { g: { command: 'python', args: ['${workspaceFolder}/s.py'] } } }), `${homedir()}/.cursor/mcp.json`);
    expect(global.servers.g!.args).toEqual(['${workspaceFolder}/s.py']);
    expect(global.notes.join('\n')).toMatch(/"\$\{workspaceFolder\}" has no hub equivalent here/);
  });

  it('warns of secret-looking header values written in the clear', () => {
    const r = importClientConfig(JSON.stringify({ servers: { gh: { type: 'http', url: 'https://x/mcp', headers: { 'X-Api-Key': 'sk-live-123' } } } }), '/w/.vscode/mcp.json');
    expect(r.warnings.join('\n')).toMatch(/"gh" has secret-looking values in headers \(X-Api-Key\)/);
  });

  it('warns of credentials written literally in args (a flag that names one, a known token shape, password=…), naming the positions, never the values', () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          flags: { command: 'npx', args: ['-y', 'some-mcp', '--api-key', 'sk-ant-abcdefghijklmnopqrstuvwxyz0123', '--token=tok-998877', '--region', 'eu'] },
          shapes: { command: 'node', args: ['server.js', 'ghp_abcdefghijklmnopqrstuvwxyz0123456789', 'postgres://bob:hunter2-pw@db/app', 'mysql-password=s3cr3t-pw'] },
          referenced: { command: 'npx', args: ['some-mcp', '--api-key', '${env:KEY}', '--token=${env:TOKEN}', '--verbose'] },
          plain: { command: 'npx', args: ['some-mcp', '--token-file', '/run/token', '--auth', '--port', '8080'] },
        },
      }),
      '/w/claude_desktop_config.json',
    );
    expect(r.warnings).toEqual([
      expect.stringMatching(/^server "flags" has secret-looking values in args \(args\[3\], args\[4\]\), written to the config in clear: put each in an environment variable/),
      expect.stringMatching(/^server "shapes" has secret-looking values in args \(args\[1\], args\[2\], args\[3\]\)/),
    ]);
    const said = [...r.warnings, ...r.notes].join('\n');
    for (const secret of ['sk-ant-', 'tok-998877', 'ghp_', 'hunter2', 's3cr3t']) expect(said).not.toContain(secret);
  });

  it('warns of a password or token in a url (user info, a secret-looking query parameter), naming where and never the value, unless it is an ${env:…} reference', () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          both: { url: 'https://bob:hunter2-pw@mcp.example.com/mcp?api_key=sk-live-999&region=eu' },
          user: { url: 'https://ghp_tokenvalue1234@mcp.example.com/mcp' },
          query: { type: 'http', url: 'https://mcp.example.com/mcp?access_token=at-555&token=t-6' },
          plain: { url: 'https://mcp.example.com/mcp?region=eu' },
          referenced: { url: 'https://bob:${env:PW}@mcp.example.com/mcp?api_key=${env:KEY}' },
        },
      }),
      '/w/claude_desktop_config.json',
    );
    expect(r.warnings).toEqual([
      expect.stringMatching(/^server "both" has a password \(its user info\) and a secret-looking query parameter \(api_key\) in its url, written to the config in clear: put each in an environment variable and write "\$\{env:NAME\}" in its place/),
      expect.stringMatching(/^server "user" has a user name that may be a token \(its user info\) in its url, written to the config in clear: put it in/),
      expect.stringMatching(/^server "query" has a secret-looking query parameter \(access_token, token\) in its url/),
    ]);
    const said = [...r.warnings, ...r.notes].join('\n');
    for (const secret of ['hunter2-pw', 'sk-live-999', 'ghp_tokenvalue1234', 'at-555', 't-6', 'bob']) expect(said).not.toContain(secret);
  });

  it("says that stdio servers get a baseline of the hub's environment, not the client's whole one (naming them, not HTTP ones)", () => {
    const r = importClientConfig(JSON.stringify({ servers: { aws: { command: 'npx', args: ['aws-mcp'] }, gh: { type: 'http', url: 'https://x/mcp' } } }), '/w/.vscode/mcp.json');
    const note = r.notes.find((n) => n.includes('baseline'));
    expect(note).toMatch(/^aws: a stdio server gets only a baseline of the hub's environment .*"inheritEnv"/);
    expect(importClientConfig(JSON.stringify({ servers: { gh: { type: 'http', url: 'https://x/mcp' } } }), '/w/.vscode/mcp.json').notes.some((n) => n.includes('baseline'))).toBe(false);
  });

  it('leaves out headers the hub sets itself, so the imported config loads', () => {
    const r = importClientConfig(
      JSON.stringify({
        mcpServers: {
          api: { url: 'https://x/mcp', headers: { 'Content-Type': 'application/json', Accept: 'application/json', 'X-Team': 't1' } },
          bare: { url: 'https://y/mcp', headers: { 'content-type': 'application/json' } },
        },
      }),
      '/home/u/.cursor/mcp.json',
    );
    expect(r.servers.api).toEqual({ url: 'https://x/mcp', headers: { 'X-Team': 't1' } });
    expect(r.servers.bare).toEqual({ url: 'https://y/mcp' });
    expect(r.notes).toContain('server "api" sets headers the hub sets on each request itself (Content-Type, Accept): they were left out.');
    expect(configProblems({ servers: r.servers }, {})).toEqual([]);
  });
});

describe('a client config that is not JSON', () => {
  it('is refused saying where, without quoting the file (it may hold a token)', () => {
    const text = '{"mcpServers":{"gh":{"command":"x","env":{"GITHUB_TOKEN":ghp_abcdef1234567890abcdef1234567890}}}}';
    let message = '';
    try {
      importClientConfig(text, 'claude_desktop_config.json');
    } catch (err) {
      expect(err).toBeInstanceOf(ImportError);
      message = (err as Error).message;
    }
    expect(message).toMatch(/^claude_desktop_config\.json is not valid JSON \(/);
    expect(message).not.toContain('ghp_');
  });
});
