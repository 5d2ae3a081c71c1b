/** The hub's state folders keep themselves out of git when the hub made them (src/paths.ts). */
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeStateDir } from '../../src/paths.js';
import { writeTokenFile, type StoredTokens } from '../../src/upstream/oauth-token-store.js';

const dir = mkdtempSync(join(tmpdir(), 'switchyard-state-dir-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('makeStateDir', () => {
  it('puts a .gitignore of * in the topmost folder it creates, and none in a folder that was there', () => {
    makeStateDir(join(dir, 'a', 'b'));
    expect(readFileSync(join(dir, 'a', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
    expect(readdirSync(join(dir, 'a', 'b'))).toEqual([]);
    mkdirSync(join(dir, 'mine'));
    makeStateDir(join(dir, 'mine'));
    expect(readdirSync(join(dir, 'mine'))).toEqual([]);
  });

  it('fails at once where the file system refuses a folder with ENOENT for ever (/proc), and where a file is in the way', () => {
    // Node's recursive mkdir asked again for as long as it heard ENOENT: this hung at full CPU.
    expect(() => makeStateDir('/proc/switchyard-none/data')).toThrow(expect.objectContaining({ code: 'ENOENT', syscall: 'mkdir', path: '/proc/switchyard-none' }));
    writeFileSync(join(dir, 'plain'), '');
    expect(() => makeStateDir(join(dir, 'plain', 'data'))).toThrow(expect.objectContaining({ code: 'ENOTDIR' }));
  });

  it('covers the login tokens when `switchyard login` runs before the first start', () => {
    mkdirSync(join(dir, 'project'));
    const url = 'https://mcp.example.com/mcp';
    const tokens: StoredTokens = { serverUrl: url, resource: url, issuer: 'https://as.example.com', tokenEndpoint: 'https://as.example.com/token', clientId: 'c', clientAuth: 'none', accessToken: 't', scopes: [], obtainedAt: 0 };
    writeTokenFile(join(dir, 'project', 'data', 'oauth-tokens', 'gh.json'), tokens);
    expect(readFileSync(join(dir, 'project', 'data', '.gitignore'), 'utf8')).toMatch(/^\*$/m);
  });
});
