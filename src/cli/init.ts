import { chmodSync, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Argv, CommandModule } from 'yargs';
import { ImportError, importClientConfig, type ImportedServer } from '../config/import-clients.js';
import { ConfigError, loadConfig } from '../config/load.js';
import { packageRoot } from '../paths.js';
import { SCHEMA_RELATIVE_PATH } from '../config/schema.js';
import { shellArg } from '../shell-arg.js';
import { counted } from '../counted.js';
import { makeDirs } from '../make-dirs.js';
import { say } from './said.js';

interface InitArgs {
  config: string;
  from?: string;
  force: boolean;
}

const KIND_NAMES = { 'claude-desktop': 'Claude Desktop', cursor: 'Cursor', 'claude-code': 'Claude Code', vscode: 'VS Code', cline: 'Cline', 'roo-code': 'Roo Code', windsurf: 'Windsurf' } as const;

/**
 * `$schema` for a config written at `file`, naming the schema of the switchyard at `root` (this
 * one) as an editor finds it for as long as it can. The path this switchyard runs from is not
 * always that: installed with the project, Node runs it from where the package manager put it
 * (pnpm's store, `node_modules/.pnpm/switchyard@0.1.0/…`: another folder at each upgrade), and
 * `npx switchyard init` from npx's cache, which npm clears. So:
 * - a clone (or an install) the config is inside of: relative within it;
 * - switchyard a dependency of the config's project (a `node_modules/switchyard` the config's
 *   folder or one above it holds, as Node would resolve it from there): that, relative;
 * - else (a global install, npx's cache, a clone elsewhere): the schema's absolute file URL,
 *   which resolves wherever the config is moved on this machine while that switchyard is there
 *   (a relative path climbing out of the project broke at any move of either), with a note
 *   (`outside`) saying so.
 */
export function schemaRef(file: string, root = packageRoot): { ref: string; outside?: string } {
  const from = dirname(file);
  const relativeRef = (to: string): string => {
    const rel = relative(from, to).replaceAll('\\', '/');
    return rel.startsWith('.') ? rel : `./${rel}`;
  };
  let name = 'switchyard';
  try {
    const n = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name?: unknown }).name;
    if (typeof n === 'string' && n) name = n;
  } catch {
    // The name it is published under.
  }
  const schema = join(root, SCHEMA_RELATIVE_PATH);
  const inside = relative(root, from);
  if (!inside.startsWith('..') && !isAbsolute(inside)) return { ref: relativeRef(schema) };
  for (let dir = from; ; dir = dirname(dir)) {
    const dep = join(dir, 'node_modules', name, SCHEMA_RELATIVE_PATH);
    if (existsSync(dep)) return { ref: relativeRef(dep) };
    if (dirname(dir) === dir) break;
  }
  const url = pathToFileURL(schema).href;
  const npxCache = /[\\/]_npx[\\/]/.test(schema);
  // Installed from its folder: the registry's package of that name is another project, so
  // `npm install --save-dev switchyard` would install that one (README, "Pointing your IDE at it").
  const install = npxCache ? 'npm install --save-dev <your switchyard clone>' : `npm install --save-dev ${shellArg(root)}`;
  return {
    ref: url,
    outside: `"$schema" names the schema of this switchyard, outside the config's project (${url}): an editor finds it on this machine while that switchyard is installed there${npxCache ? " (npx's cache, which npm clears now and then)" : ''}; with switchyard a dependency of the project (${install}, its folder: the npm registry's "${name}" is another project), \`${name} init\` points into its node_modules`,
  };
}

export function starterConfig(file: string, servers: Record<string, ImportedServer>): Record<string, unknown> {
  return {
    $schema: schemaRef(file).ref,
    listen: { host: '127.0.0.1', port: 7410 },
    ledger: { path: './data/ledger.db' },
    servers,
  };
}

/** What the errno of a config that cannot be written means, where its code alone does not say. */
const WRITE_ERRORS: Record<string, string> = { ENOTDIR: ': a part of the path is a file, not a folder', EACCES: ': permission denied', EPERM: ': not permitted', EROFS: ': a read-only file system' };

/** Whether two paths are one file (its device and inode): a symlink or `a/../a` is the same file. */
function sameFile(a: string, b: string): boolean {
  const [x, y] = [statSync(a), statSync(b)];
  return x.dev === y.dev && x.ino === y.ino;
}

export const initCommand: CommandModule<object, InitArgs> = {
  command: 'init',
  describe: 'Write a starter hub.config.json; --from imports the servers of a Claude Desktop, VS Code, Cursor, Claude Code, Cline, Roo Code or Windsurf config',
  builder: (y: Argv) =>
    y
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'File to write' })
      .option('from', {
        type: 'string',
        describe: 'A client config to import: claude_desktop_config.json, .vscode/mcp.json, ~/.cursor/mcp.json, .mcp.json, cline_mcp_settings.json, .roo/mcp.json or windsurf/mcp_config.json',
      })
      .option('force', { type: 'boolean', default: false, describe: 'Overwrite an existing file' }) as Argv<InitArgs>,
  handler: (argv) => {
    const file = resolve(argv.config);
    // "already exists; pass --force" would send the user on to EISDIR.
    if (existsSync(file) && statSync(file).isDirectory()) {
      process.stderr.write(`switchyard init: ${argv.config} is a folder: give the file to write, such as ${shellArg(join(argv.config, 'hub.config.json'))}\n`);
      process.exitCode = 2;
      return;
    }
    // Read first: a --from naming nothing is what to fix, before "already exists; pass --force" sends the user on to it.
    let text: string | undefined;
    if (argv.from) {
      try {
        text = readFileSync(argv.from, 'utf8');
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // A server's address given for a client's config: said so, and not echoed (its user info
        // or query may hold a password or token, and this line goes to a terminal's scrollback).
        if (code === 'ENOENT' && /^[a-z][a-z0-9+.-]*:\/\//i.test(argv.from)) {
          process.stderr.write(
            `switchyard init: --from takes a client's config file (such as claude_desktop_config.json or .vscode/mcp.json), not a URL: add an HTTP server to the written config under "servers" as {"url": "…"}, with any password or token as "\${env:NAME}"\n`,
          );
          process.exitCode = 2;
          return;
        }
        // A path with a typo is a usage error (2), as a --config that is not there is everywhere.
        process.stderr.write(code === 'ENOENT' ? `switchyard init: ${argv.from}: no such file: give --from the client config to import\n` : `switchyard init: cannot read ${argv.from} (${code ?? (err as Error).message})\n`);
        process.exitCode = code === 'ENOENT' ? 2 : 1;
        return;
      }
    }
    // The client's own config (by another spelling, a link): --force replaced it with the hub's,
    // and "already exists; pass --force" led there.
    if (argv.from && existsSync(file) && sameFile(argv.from, file)) {
      process.stderr.write(`switchyard init: ${argv.config}: --from and --config name the same file: the import would replace the client's config; give --config another file, such as hub.config.json\n`);
      process.exitCode = 2;
      return;
    }
    if (existsSync(file) && !argv.force) {
      process.stderr.write(`switchyard init: ${argv.config} already exists; pass --force to overwrite it\n`);
      process.exitCode = 1;
      return;
    }
    let servers: Record<string, ImportedServer> = {};
    let notes: string[] = [];
    let warnings: string[] = [];
    let summary = 'no servers yet: add them under "servers" (a "command" for stdio, a "url" for HTTP)';
    if (text !== undefined) {
      try {
        const r = importClientConfig(text, argv.from!, dirname(file));
        servers = r.servers;
        notes = r.notes;
        warnings = r.warnings;
        summary = `${counted(Object.keys(servers).length, 'server')} imported from ${argv.from} (${KIND_NAMES[r.kind]}): ${Object.keys(servers).join(', ') || 'none'}`;
      } catch (err) {
        if (!(err instanceof ImportError)) throw err;
        process.stderr.write(`switchyard init: ${err.message}\n`);
        process.exitCode = 1;
        return;
      }
    }
    try {
      makeDirs(dirname(file));
      writeFileSync(file, JSON.stringify(starterConfig(file, servers), null, 2) + '\n', { mode: 0o600 });
      // `mode` applies only to a file created here: one overwritten with --force keeps its own.
      chmodSync(file, 0o600);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (typeof e.code !== 'string') throw err;
      // The file system's refusal (a read-only one, /proc, a file where a folder should be), in one line.
      const where = e.syscall === 'mkdir' && typeof e.path === 'string' ? `cannot create the folder ${e.path}` : 'cannot write it';
      const why = WRITE_ERRORS[e.code] ?? '';
      process.stderr.write(`switchyard init: ${argv.config}: ${where} (${e.code}${why}): give --config a path in a folder this user can write\n`);
      process.exitCode = 1;
      return;
    }
    // stdout: what was done and what to run next. The notes and warnings beside them go to
    // stderr as the command's, as every command's do: bare `note:` lines among the output did
    // not say whose they were in a script's log, and `init … > file` kept them from the user.
    process.stdout.write(`wrote ${argv.config}: ${summary}\n`);
    const outside = schemaRef(file).outside;
    for (const n of outside === undefined ? notes : [...notes, outside]) say('init', `note: ${n}`);
    for (const w of warnings) say('init', `warning: ${w}`);
    try {
      loadConfig(file);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      for (const p of err.problems) say('init', `warning: ${argv.config} does not validate yet: ${p}`);
    }
    // A line to paste into a shell: a path with spaces or quotes is one word there too.
    const config = shellArg(argv.config);
    process.stdout.write(`next: switchyard config validate --config ${config} && switchyard start --config ${config}\n`);
  },
};
