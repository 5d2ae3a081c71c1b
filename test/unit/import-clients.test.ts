/** Client-config import (pure parts): JSON with comments, detection, ids, VS Code variables. */
import { describe, expect, it } from 'vitest';
import { detectKind, importClientConfig, ImportError, stripJsonc } from '../../src/config/import-clients.js';

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
    expect(detectKind({ mcpServers: {} }, '/x/claude_desktop_config.json')).toBe('claude-desktop');
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
});
