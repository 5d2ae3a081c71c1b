/** Which command modules the CLI loads: the one named first, else all (help and usage errors as the whole CLI's). */
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import yargs from 'yargs';
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

const helps = new Map<string, Promise<string>>();
/** A command's --help as yargs writes it, in this process (no command runs). */
function helpOf(path: string[]): Promise<string> {
  const key = path.join(' ');
  if (!helps.has(key))
    helps.set(
      key,
      COMMANDS[path[0]!]!().then((command) => {
        const y = yargs().scriptName('switchyard').exitProcess(false).command(command);
        return new Promise<string>((resolve) => void y.parse([...path, '--help'], {}, (_err, _argv, output) => resolve(output)));
      }),
    );
  return helps.get(key)!;
}

/** The options a --help lists, each with its aliases as typed (`-f`, `--follow`), not --help and --version. */
const optionsIn = (help: string): string[][] =>
  [...help.matchAll(/^\s+(-\w, )?(--?[\w-]+)\s/gm)].map((m) => [m[2]!, ...(m[1] ? [m[1].slice(0, 2)] : [])]).filter(([o]) => o !== '--help' && o !== '--version');

const SUBCOMMANDS: Record<string, string[]> = {
  config: ['validate'],
  servers: ['restart'],
  tools: ['diff', 'approve', 'export'],
  keys: ['add', 'remove', 'list'],
  ledger: ['query', 'tail', 'stats', 'verify', 'export', 'keys', 'prune'],
};

describe("README's CLI table and the commands' own options", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const cliSection = readme.slice(readme.indexOf('\n## CLI\n'), readme.indexOf('\n## ', readme.indexOf('\n## CLI\n') + 1));

  it('every option the table gives a command is one it takes', async () => {
    const rows = cliSection.split('\n').filter((l) => l.startsWith('| `switchyard '));
    expect(rows.length).toBeGreaterThan(12);
    const wrong: string[] = [];
    for (const row of rows) {
      // `switchyard tools diff NAME` / `tools approve NAME \| --server ID [--kind K]`: each span its command.
      const cell = row.slice(1).split(/(?<!\\)\|/)[0]!;
      let top = '';
      for (const span of [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\\\|/g, '|'))) {
        const words = span.split(/\s+/).filter((w) => w !== 'switchyard');
        if (Object.hasOwn(COMMANDS, words[0]!)) top = words.shift()!;
        const subs = (words[0] ?? '').split('|').filter((w) => SUBCOMMANDS[top]?.includes(w));
        if (subs.length) words.shift();
        const flags = span.match(/(?<![\w-])--?[a-z][\w-]*/g) ?? [];
        for (const path of subs.length ? subs.map((sub) => [top, sub]) : [[top]]) {
          const taken = optionsIn(await helpOf(path)).flat();
          for (const f of flags) if (!taken.includes(f) && !taken.includes(f.replace(/^--no-/, '--'))) wrong.push(`switchyard ${path.join(' ')} ${f}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('has a row for every command and subcommand the CLI has', async () => {
    // The subcommands as each command's --help lists them, so a new one is not left out here either.
    for (const top of Object.keys(COMMANDS)) {
      const listed = [...(await helpOf([top])).matchAll(new RegExp(`^\\s+switchyard ${top} ([a-z]+)`, 'gm'))].map((m) => m[1]!);
      expect(listed.sort(), top).toEqual([...(SUBCOMMANDS[top] ?? [])].sort());
    }
    const rows = cliSection.split('\n').filter((l) => l.startsWith('| `switchyard '));
    // The first cell's spans: `switchyard login ID …` / `logout ID …`, `ledger query\|tail\|…`.
    const spans = rows.flatMap((row) => [...row.slice(1).split(/(?<!\\)\|/)[0]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\\\|/g, '|').replace(/^switchyard /, '')));
    const shown = (path: string[]) => spans.some((s) => {
      const [top, sub = ''] = s.split(/\s+/);
      return top === path[0] && (path.length === 1 || sub.split('|').includes(path[1]!));
    });
    const paths = Object.keys(COMMANDS).flatMap((c) => [[c], ...(SUBCOMMANDS[c] ?? []).map((s) => [c, s])]);
    // `tools export` is `tools --format` under another name, and the table says so in that row.
    const missing = paths.filter((p) => !shown(p) && !(p.join(' ') === 'tools export' && cliSection.includes('`tools export --format …`')));
    expect(missing.map((p) => `switchyard ${p.join(' ')}`)).toEqual([]);
  });

  it("the kinds the tools line names are the values its --kind takes (it named plurals, which --kind refused)", async () => {
    const choices = [.../ --kind\s[\s\S]*?\[choices: ([^\]]+)\]/.exec(await helpOf(['tools']))![1]!.matchAll(/"(\w+)"/g)].map((m) => m[1]);
    const named = /--kind ([a-z|]+)/.exec(COMMAND_LINES.tools![1])?.[1]?.split('|');
    expect(named).toEqual(choices.filter((c) => c !== 'tool'));
  });

  it('every option a command takes is named in README.md', async () => {
    const missing: string[] = [];
    const paths = Object.keys(COMMANDS).flatMap((c) => [[c], ...(SUBCOMMANDS[c] ?? []).map((s) => [c, s])]);
    for (const path of paths) {
      for (const forms of optionsIn(await helpOf(path))) {
        // A boolean that is on by default is named by its negation (`--no-watch`); `--follow` as `tail -f`.
        const named = forms.flatMap((o) => [o, o.replace(/^--/, '--no-')]).some((form) => new RegExp(`(?<![\\w-])${form}(?![\\w-])`).test(readme));
        if (!named) missing.push(`switchyard ${path.join(' ')} ${forms[0]}`);
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('the command lines README.md and docs/*.md show', () => {
  const DOCS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md') && f !== 'BENCHMARKS.md').map((f) => `docs/${f}`)];
  /** Each code span, and each line of a fenced block other than JSON, of a file: where a command is shown to be typed. */
  const codeOf = (file: string): string[] => {
    const md = readFileSync(join(ROOT, file), 'utf8');
    const out = [...md.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!);
    let lang: string | undefined;
    for (const l of md.split('\n')) {
      const fence = /^\s*```(\S*)/.exec(l);
      if (fence) lang = lang === undefined ? fence[1]! : undefined;
      else if (lang !== undefined && !lang.startsWith('json')) out.push(l);
    }
    return out;
  };
  // `switchyard X` where it is typed: at the start, after `npx`, a prompt, a pipe or `&&`, not in a
  // sentence such as "no switchyard daemon is running". `switchyard listening` is the hub's log line.
  const commandLines = DOCS.flatMap((f) =>
    codeOf(f).flatMap((code) =>
      code
        .split(/&&|;|(?<!\\)\|(?!\|)/)
        .flatMap((seg) => [...seg.matchAll(/(?:^|npx |\$ |\()\s*switchyard ([a-z][\w-]*)(.*)$/g)].map((m) => ({ f, top: m[1]!, rest: m[2]!, code })))
        .filter((c) => c.top !== 'listening'),
    ),
  );

  it('name only commands the CLI has (CATALOG.md named a `switchyard import`)', () => {
    expect(commandLines.length).toBeGreaterThan(100);
    expect(commandLines.filter((c) => !Object.hasOwn(COMMANDS, c.top)).map((c) => `${c.f}: switchyard ${c.top}`)).toEqual([]);
  });

  it('give each command only options it takes', async () => {
    const wrong: string[] = [];
    let checked = 0;
    for (const { f, top, rest, code } of commandLines.filter((c) => Object.hasOwn(COMMANDS, c.top))) {
      // A usage error quoted as the CLI writes it names an option the command does not take, on purpose.
      if (/unknown option/.test(code)) continue;
      const sub = /^\s+([a-z]+)/.exec(rest)?.[1];
      const path = sub && SUBCOMMANDS[top]?.includes(sub) ? [top, sub] : [top];
      const taken = optionsIn(await helpOf(path)).flat();
      for (const flag of rest.replace(/#.*$/, '').match(/(?<![\w-])--?[a-z][\w-]*/g) ?? []) {
        checked++;
        if (!taken.includes(flag) && !taken.includes(flag.replace(/^--no-/, '--'))) wrong.push(`${f}: switchyard ${path.join(' ')} ${flag}`);
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(wrong).toEqual([]);
  });
});
