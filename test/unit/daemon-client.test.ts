/**
 * Which daemon `reload`, `servers`, `doctor` and `tools` talk to (src/cli/daemon-client.ts
 * daemonBase): the one the config file names, read as the daemon reads it, a byte-order mark
 * included; the defaults only when there is no file (none at the default name); a file that
 * gives no address (not JSON) is refused, not guessed at.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { daemonBase, fallbackOf, NoAddressInConfig } from '../../src/cli/daemon-client.js';

describe('daemonBase', () => {
  it("reads listen from a config saved with a byte-order mark, as the daemon does", () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-daemon-base-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, '\uFEFF' + JSON.stringify({ listen: { host: '127.0.0.1', port: 7500 } }));
    expect(daemonBase(undefined, file)).toBe('http://127.0.0.1:7500');
    writeFileSync(file, '{ not json');
    // --url still decides, whatever the file says.
    expect(daemonBase('http://127.0.0.1:9000/mcp', file)).toBe('http://127.0.0.1:9000');
  });

  it('refuses a config that is there but gives no address (not JSON, a folder, a listen or listen.port of the wrong type), rather than guess the default one', () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-daemon-base-'));
    const file = join(d, 'hub.config.json');
    // A config mid-edit, its daemon running on the port it had before: 7410 was asked instead,
    // "no switchyard daemon is running" (exit 3).
    writeFileSync(file, '{ "listen": { "port": 7500, }, "servers": { "x": { "headers": { "authorization": Bearer sk-live-SECRET123 } } } }');
    const said = (f: string) => {
      try {
        daemonBase(undefined, f);
      } catch (err) {
        expect(err).toBeInstanceOf(NoAddressInConfig);
        return (err as Error).message;
      }
      return 'no error';
    };
    expect(said(file)).toBe(`${file}: not valid JSON (line 1 column 27: a trailing comma before '}', which JSON does not allow: remove it): the daemon's address is read from it; fix the file, or give the address with --url`);
    // Located, never quoted: the file may hold a literal secret.
    writeFileSync(file, '{ "servers": { "x": { "headers": { "authorization": Bearer sk-live-SECRET123 } } } }');
    expect(said(file)).not.toContain('SECRET');
    writeFileSync(file, JSON.stringify({ listen: { port: '7500' } }));
    expect(said(file)).toBe(`${file}: listen.port is no port number: the daemon's address is read from it; fix the file, or give the address with --url`);
    writeFileSync(file, JSON.stringify({ listen: 7500 }));
    expect(said(file)).toBe(`${file}: listen is no object (such as {"port": 7410}): the daemon's address is read from it; fix the file, or give the address with --url`);
    writeFileSync(file, '[]');
    expect(said(file)).toMatch(/: not a JSON object: /);
    mkdirSync(join(d, 'folder.json'));
    expect(said(join(d, 'folder.json'))).toMatch(/folder\.json: cannot read it \(EISDIR\): /);
  });

  it('goes to the admin listener (listen.admin) when the config has one: its socket, relative to the config file, or its port', () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-daemon-base-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, JSON.stringify({ listen: { port: 7500, admin: { path: 'run/admin.sock' } } }));
    expect(daemonBase(undefined, file)).toBe(`unix:${join(d, 'run/admin.sock')}`);
    writeFileSync(file, JSON.stringify({ listen: { host: '127.0.0.1', port: 7500, admin: { port: 7501 } } }));
    expect(daemonBase(undefined, file)).toBe('http://127.0.0.1:7501');
    writeFileSync(file, JSON.stringify({ listen: { port: 7500, admin: { host: '::', port: 7501 } } }));
    expect(daemonBase(undefined, file)).toBe('http://[::1]:7501');
    // Where to ask when nothing listens there (a daemon started before listen.admin was added): the main listener, if it has a port.
    expect(fallbackOf(daemonBase(undefined, file))).toBe('http://127.0.0.1:7500');
    writeFileSync(file, JSON.stringify({ listen: { port: 0, admin: { path: 'other.sock' } } }));
    expect(fallbackOf(daemonBase(undefined, file))).toBeUndefined();
    // --url still decides; unix: names a socket.
    expect(daemonBase('http://127.0.0.1:9000', file)).toBe('http://127.0.0.1:9000');
    expect(daemonBase('unix:/run/switchyard/admin.sock', file)).toBe('unix:/run/switchyard/admin.sock');
  });
});
