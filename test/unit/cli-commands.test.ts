/** Which command modules the CLI loads: the one named first, else all (help and usage errors as the whole CLI's). */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COMMAND_LINES, COMMANDS, commandsToLoad, onlyOptions } from '../../src/cli/commands.js';
import { BIN, ROOT } from '../helpers/hub-process.js';

/** `switchyard …args` with the packages it imports (test/fixtures/imports). */
function run(args: string[]): Promise<{ code: number; stdout: string; imported: string[] }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', join(ROOT, 'test/fixtures/imports/register.mjs'), BIN, ...args], { cwd: ROOT }, (e, stdout, stderr) =>
      resolve({ code: e ? Number(e.code) : 0, stdout, imported: [...new Set([...stderr.matchAll(/^IMPORTED (\S+)$/gm)].map((m) => m[1]!))] }),
    );
  });
}

describe('the CLI loads', () => {
  it('only the command named first', () => {
    expect(commandsToLoad(['servers', 'restart', 'x'])).toEqual(['servers']);
    expect(commandsToLoad(['ledger', 'query', '--limit', '5'])).toEqual(['ledger']);
  });

  it('every command when none is named first: help, a typo, an option before it, a name from Object.prototype', () => {
    const all = Object.keys(COMMANDS);
    expect(all).toHaveLength(13);
    for (const args of [[], ['--help'], ['servrs'], ['--config', 'x', 'start'], ['toString'], ['__proto__']]) expect(commandsToLoad(args)).toEqual(all);
  });

  it('each command module gives a command of its name, with the line the help shows without loading it', async () => {
    expect(Object.keys(COMMAND_LINES)).toEqual(Object.keys(COMMANDS));
    for (const [name, load] of Object.entries(COMMANDS)) {
      const c = await load();
      expect(String(c.command).split(' ')[0]).toBe(name);
      expect([c.command, c.describe], name).toEqual(COMMAND_LINES[name]);
    }
  });

  it('no command module, only their lines, when the arguments name no command', () => {
    for (const args of [[], ['--help'], ['--version'], ['--bogus', '-h'], ['--config=x']]) expect(onlyOptions(args)).toBe(true);
    for (const args of [['start'], ['--config', 'x'], ['servrs'], ['--help', 'ledger']]) expect(onlyOptions(args)).toBe(false);
  });
});

describe('switchyard --help and --version', () => {
  // Asked often (scripts, editors): --help loaded every command (pino, ajv, better-sqlite3...),
  // --version too, and yargs: ~0.7 s where node itself takes ~0.1 s.
  it('--help lists every command, loading yargs and none of the commands', async () => {
    const r = await run(['--help']);
    expect(r.code).toBe(0);
    for (const [command, describe] of Object.values(COMMAND_LINES)) {
      expect(r.stdout).toContain(`switchyard ${command}`);
      expect(r.stdout.replace(/\s+/g, ' ')).toContain(describe);
    }
    expect(r.imported).toContain('yargs');
    expect(r.imported.filter((p) => ['pino', 'ajv', 'better-sqlite3', 'eventsource-parser'].includes(p))).toEqual([]);
  });

  it('--version prints the package version, loading no package', async () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(await run(['--version'])).toEqual({ code: 0, stdout: `${pkg.version}\n`, imported: [] });
  });
});
