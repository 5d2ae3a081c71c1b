/**
 * `${NAME}` and `${NAME:-default}` in a server's settings: Claude Code's and the shells' way to
 * read a variable, not the hub's (`${env:NAME}`); and VS Code's `${input:ID}` and
 * `${workspaceFolder}`, which only that client fills in. The hub sends such text as it is written, so a
 * server entry pasted from a client's config (`mcpServers` is accepted for that) would get the
 * characters "${GITHUB_TOKEN}" as its token. Not a config error: the text may be meant (a
 * program that expands it itself), and a config that ran must still start after an upgrade.
 * Said where an operator looks (ignored-settings.ts: the log, `config validate`, `doctor`).
 */
import type { ServerConfig } from './types.js';

// The variable's name only: a `:-default` may be a literal credential, and is never quoted.
// VS Code's `${input:ID}` too (its prompt for a value; `init --from` makes it an environment variable).
const SHELL_REFERENCE = /(?<!\$)\$\{(?:([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?|input:([A-Za-z0-9_.-]+))\}/;
// VS Code's and Cursor's variables that stand for a path: no environment variable gives it.
const PATH_VARIABLES = new Set(['workspaceFolder', 'workspaceFolderBasename', 'workspaceRoot', 'userHome', 'cwd', 'pathSeparator']);
// A shell given its script on the command line expands the script's references itself.
const SHELL = /(^|[\\/])(sh|bash|zsh|dash|ksh|fish|pwsh|powershell)(\.exe)?$/i;

export function shellReferences(id: string, s: Partial<Pick<ServerConfig, 'command' | 'args' | 'env' | 'cwd' | 'url' | 'headers' | 'credentials'>>): string[] {
  const out: string[] = [];
  const check = (path: string, value: unknown) => {
    if (typeof value !== 'string' || !value.includes('${')) return;
    const m = SHELL_REFERENCE.exec(value);
    if (!m) return;
    const [, name, dflt, input] = m;
    const said = `servers.${id}.${path} holds "\${${name ?? `input:${input}`}${dflt ? ':-…' : ''}}", which the hub sends as it is written`;
    if (input !== undefined) {
      const env = `SWITCHYARD_INPUT_${input.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}`;
      out.push(`${said}: the hub prompts for no value (VS Code's input); set an environment variable such as ${env} and write "\${env:${env}}"`);
    } else if (PATH_VARIABLES.has(name!)) out.push(`${said}: the hub expands no client variable; write the path itself`);
    else out.push(`${said}: write "\${env:${name}}" to read the environment variable${dflt ? ' (the hub has no default: set it before starting the hub)' : ''}`);
  };
  check('command', s.command);
  if (!(s.command && SHELL.test(s.command))) (s.args ?? []).forEach((a, i) => check(`args[${i}]`, a));
  for (const [k, v] of Object.entries(s.env ?? {})) check(`env.${k}`, v);
  check('cwd', s.cwd);
  check('url', s.url);
  for (const [k, v] of Object.entries(s.headers ?? {})) check(`headers.${k}`, v);
  for (const [p, c] of Object.entries(s.credentials ?? {})) for (const [k, v] of Object.entries(c.headers ?? {})) check(`credentials.${p}.headers.${k}`, v);
  return out;
}
