/**
 * Which daemon `reload`, `servers`, `doctor` and `tools` talk to (src/cli/daemon-client.ts
 * daemonBase): the one the config file names, read as the daemon reads it, a byte-order mark
 * included; the defaults only when the file says nothing.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { daemonBase } from '../../src/cli/daemon-client.js';

describe('daemonBase', () => {
  it("reads listen from a config saved with a byte-order mark, as the daemon does", () => {
    const d = mkdtempSync(join(tmpdir(), 'switchyard-daemon-base-'));
    const file = join(d, 'hub.config.json');
    writeFileSync(file, '\uFEFF' + JSON.stringify({ listen: { host: '127.0.0.1', port: 7500 } }));
    expect(daemonBase(undefined, file)).toBe('http://127.0.0.1:7500');
    writeFileSync(file, '{ not json');
    expect(daemonBase(undefined, file)).toBe('http://127.0.0.1:7410');
    expect(daemonBase('http://127.0.0.1:9000/mcp', file)).toBe('http://127.0.0.1:9000');
  });
});
