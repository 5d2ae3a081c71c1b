import { describe, expect, it } from 'vitest';
import { ignoredSettings } from '../../src/config/ignored-settings.js';
import type { ServerConfig } from '../../src/config/types.js';

const server = (s: Partial<ServerConfig>) => ({ trust: 'untrusted', ...s }) as ServerConfig;

describe('ignoredSettings', () => {
  it('names autoApprove on a server that is not trusted, and nothing else', () => {
    const said = ignoredSettings({
      servers: { u: server({ autoApprove: true }), t: server({ trust: 'trusted', autoApprove: true }), f: server({ autoApprove: false }), n: server({}) },
    });
    expect(said).toEqual([expect.stringMatching(/^servers\.u\.autoApprove is ignored: it applies only to a server with "trust": "trusted"/)]);
  });

  it('names a server whose url carries a user name or password (never sent), without quoting either', () => {
    const said = ignoredSettings({
      servers: { p: server({ url: 'https://alice:s3cret@mcp.example/mcp' }), t: server({ url: 'https://tok3n@mcp.example/mcp' }), ok: server({ url: 'https://mcp.example/mcp?x=1' }), c: server({ command: 'node' }) },
    });
    expect(said).toEqual([
      'servers.p.url carries a user name or password, which the hub does not send: give the credential in servers.p.headers (e.g. "Authorization": "Basic <base64 of user:password>") and take it out of the url',
      'servers.t.url carries a user name or password, which the hub does not send: give the credential in servers.t.headers (e.g. "Authorization": "Basic <base64 of user:password>") and take it out of the url',
    ]);
    expect(said.join('\n')).not.toMatch(/alice|s3cret|tok3n/);
  });

  it('names a server id of a group that is not configured (a disabled server is configured)', () => {
    const said = ignoredSettings({
      servers: { leg: server({}), off: server({ enabled: false }) },
      groups: { ok: { servers: ['leg', 'off'] }, typo: { servers: ['leg', 'lag'] }, all: { tools: ['*'] } },
    });
    expect(said).toEqual(['groups.typo.servers names "lag", which is not a configured server: /mcp/typo shows nothing of it (servers: leg, off)']);
  });

  it('names a server sharing another\'s non-empty prefix (its id as the default prefix too), not one with prefix "" nor a disabled one', () => {
    const said = ignoredSettings({
      servers: { x: server({ prefix: 'x' }), y: server({ prefix: 'x' }), z: server({ prefix: 'z' }), zz: server({ prefix: 'z', enabled: false }), a: server({ prefix: '' }), b: server({ prefix: '' }) },
    });
    expect(said).toEqual(['servers.y shares the prefix "x" with servers.x: the names both list get a hash suffix at one of them, and "x__…" no longer says which server a tool is (give each server a prefix of its own)']);
    // Unloaded (a raw config): the id is the prefix.
    expect(ignoredSettings({ servers: { q: server({}), r: server({ prefix: 'q' }) } })).toHaveLength(1);
  });
});

// Claude Code's `.mcp.json` and the shells read `${NAME}`; the hub reads `${env:NAME}` and sends
// any other text as written: an entry pasted into `mcpServers` sent a server the characters
// "${GITHUB_TOKEN}" as its token, and nothing said so.
describe('ignoredSettings: ${NAME} the hub sends as text', () => {
  it('names each setting of a server holding one, with the reference to write instead, never quoting a default', () => {
    const said = ignoredSettings({
      servers: {
        gh: server({ command: 'npx', args: ['-y', 'server-github', '--root', '${HOME}/src'], env: { GITHUB_TOKEN: '${GITHUB_TOKEN}', OK: '${env:OK}', LITERAL: '$${env:X}' }, headers: {} }),
        api: server({ url: 'https://api.example/${TENANT}/mcp', args: [], env: {}, headers: { Authorization: 'Bearer ${API_KEY:-sk-live-hunter2}' }, credentials: { bob: { headers: { 'X-Key': '${BOB_KEY}' } } } }),
        // A shell given a script expands its references itself; the hub leaves it to it.
        sh: server({ command: 'bash', args: ['-c', 'exec server --token "${TOKEN}"'], env: {}, headers: {} }),
        plain: server({ command: 'node', args: ['a$b', '{x}', '$x'], env: { A: 'cost: ${5}' }, headers: {} }),
      },
    });
    expect(said).toEqual([
      'servers.gh.args[3] holds "${HOME}", which the hub sends as it is written: write "${env:HOME}" to read the environment variable',
      'servers.gh.env.GITHUB_TOKEN holds "${GITHUB_TOKEN}", which the hub sends as it is written: write "${env:GITHUB_TOKEN}" to read the environment variable',
      'servers.api.url holds "${TENANT}", which the hub sends as it is written: write "${env:TENANT}" to read the environment variable',
      'servers.api.headers.Authorization holds "${API_KEY:-…}", which the hub sends as it is written: write "${env:API_KEY}" to read the environment variable (the hub has no default: set it before starting the hub)',
      'servers.api.credentials.bob.headers.X-Key holds "${BOB_KEY}", which the hub sends as it is written: write "${env:BOB_KEY}" to read the environment variable',
    ]);
    expect(said.join('\n')).not.toContain('hunter2');
  });

  // VS Code fills these in its own file; pasted into the hub's, they went out as text.
  it("names VS Code's ${input:ID} and path variables, each with its own fix", () => {
    const said = ignoredSettings({
      servers: {
        gh: server({ url: 'https://api.example/mcp', args: [], env: {}, headers: { Authorization: 'Bearer ${input:gh-token}' } }),
        local: server({ command: 'node', args: ['${workspaceFolder}/server.js'], env: {}, headers: {} }),
      },
    });
    expect(said).toEqual([
      'servers.gh.headers.Authorization holds "${input:gh-token}", which the hub sends as it is written: the hub prompts for no value (VS Code\'s input); set an environment variable such as SWITCHYARD_INPUT_GH_TOKEN and write "${env:SWITCHYARD_INPUT_GH_TOKEN}"',
      'servers.local.args[0] holds "${workspaceFolder}", which the hub sends as it is written: the hub expands no client variable; write the path itself',
    ]);
  });
});
