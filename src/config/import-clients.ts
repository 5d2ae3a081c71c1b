/**
 * Reading the MCP server lists of client configs, for `switchyard init --from`:
 * Claude Desktop (`claude_desktop_config.json`, `mcpServers`), Cursor (`.cursor/mcp.json`,
 * `mcpServers`, stdio or `url`), Claude Code (`.mcp.json`, `mcpServers` with `type`) and
 * VS Code (`.vscode/mcp.json`, JSON with comments, `servers` with `type` and `inputs`); Cline,
 * Roo Code and Windsurf files read as Claude Desktop's (`mcpServers`), with their `timeout`,
 * `serverUrl` and approval lists.
 * Pure: the caller reads the file and writes the result.
 */
import { homedir } from 'node:os';
import { basename, dirname, resolve, sep } from 'node:path';
import { setByHub } from './header-check.js';
import { SECRET_NAME } from './secret-values.js';
import { MAX_PREFIX_CHARS, parseJsonText } from './load.js';
import { isObj } from '../protocol/jsonrpc.js';
import { redactLogText } from '../policy/secret-text.js';

export type ClientKind = 'claude-desktop' | 'cursor' | 'claude-code' | 'vscode' | 'cline' | 'roo-code' | 'windsurf';

/** One server in hub.config.json form (only the keys the import sets). */
export interface ImportedServer {
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  url?: string;
  headers?: Record<string, string>;
  enabled?: boolean;
  timeoutMs?: number;
}

/** The longest timeout the hub takes (a Node.js timer's limit). */
const MAX_TIMEOUT_MS = 2_147_483_647;

export interface ImportResult {
  kind: ClientKind;
  servers: Record<string, ImportedServer>;
  /** Things the user should know or do (inputs to provide, skipped entries, renamed ids). */
  notes: string[];
  /**
   * Credentials the written config will hold in clear (a secret-looking env or header value, a
   * password or token in a url), named by where they are, never quoted.
   */
  warnings: string[];
}

export class ImportError extends Error {}

const SECRET_KEY = /(pass(word)?|secret|token|api[-_]?key|authorization|cookie|credential)/i;

/** JSON with comments and trailing commas (VS Code's settings dialect) → plain JSON text. */
export function stripJsonc(text: string): string {
  let out = '';
  let i = 0;
  const n = text.length;
  while (i < n) {
    const ch = text[i];
    if (ch === '"') {
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (ch === '/' && text[i + 1] === '/') {
      while (i < n && text[i] !== '\n') i++;
    } else if (ch === '/' && text[i + 1] === '*') {
      const end = text.indexOf('*/', i + 2);
      i = end < 0 ? n : end + 2;
    } else if (ch === ',') {
      // A comma followed only by whitespace/comments and a closing bracket is dropped.
      let j = i + 1;
      for (;;) {
        while (j < n && /\s/.test(text[j])) j++;
        if (text[j] === '/' && text[j + 1] === '/') while (j < n && text[j] !== '\n') j++;
        else if (text[j] === '/' && text[j + 1] === '*') {
          const end = text.indexOf('*/', j + 2);
          j = end < 0 ? n : end + 2;
        } else break;
      }
      if (text[j] !== '}' && text[j] !== ']') out += ch;
      i++;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

function stringMap(v: unknown): Record<string, string> | undefined {
  if (!isObj(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v)) if (typeof x === 'string' || typeof x === 'number' || typeof x === 'boolean') out[k] = String(x);
  return Object.keys(out).length ? out : undefined;
}

/** Which client wrote this file: by its top-level key, then its path. */
export function detectKind(doc: Record<string, unknown>, path: string): ClientKind {
  if (isObj(doc.servers) && !isObj(doc.mcpServers)) return 'vscode';
  const p = resolve(path).replaceAll('\\', '/');
  if (p.includes('/.cursor/')) return 'cursor';
  if (basename(p) === '.mcp.json' || basename(p) === '.claude.json') return 'claude-code';
  if (basename(p) === 'cline_mcp_settings.json') return 'cline';
  if (p.includes('/.roo/') || basename(p) === 'mcp_settings.json') return 'roo-code';
  if (p.includes('/windsurf/') && basename(p) === 'mcp_config.json') return 'windsurf';
  return 'claude-desktop';
}

/**
 * A hub server id from a client's server name (ids are ^[A-Za-z0-9-]+$), at most
 * MAX_PREFIX_CHARS long: it is the server's prefix, and a longer one is refused as such.
 */
function serverId(name: string, taken: Set<string>): string {
  const cut = (s: string, n: number): string => s.slice(0, n).replace(/-+$/, '');
  let id = cut(name.replace(/[^A-Za-z0-9-]+/g, '-').replace(/^-+|-+$/g, ''), MAX_PREFIX_CHARS) || 'server';
  const base = id;
  for (let k = 2; taken.has(id.toLowerCase()); k++) id = `${cut(base, MAX_PREFIX_CHARS - String(k).length - 1)}-${k}`;
  taken.add(id.toLowerCase());
  return id;
}

interface Rewriter {
  (s: string, where: string): string;
}

/**
 * VS Code variables → what the hub understands: `${input:X}` becomes an environment variable
 * the user sets (the hub has no prompt), `${workspaceFolder}` and `${userHome}` become paths,
 * `${env:X}` is already the hub's syntax.
 */
function vscodeRewriter(path: string, inputs: Map<string, { description?: string; password?: boolean }>, notes: string[]): Rewriter {
  // A user-level mcp.json (in VS Code's settings folder) serves whatever workspace is open: no one folder.
  const workspace = startFolder('vscode', path);
  const needed = new Map<string, string>();
  const rewrite: Rewriter = (s, where) =>
    s.replace(/\$\{([^}]*)\}/g, (m, inner: string) => {
      if (inner.startsWith('env:')) return m;
      if (inner.startsWith('input:')) {
        const id = inner.slice(6);
        const env = `SWITCHYARD_INPUT_${id.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}`;
        if (!needed.has(env)) {
          const info = inputs.get(id);
          needed.set(env, env);
          notes.push(
            `${where} used the VS Code input "${id}"${info?.description ? ` (${info.description})` : ''}: set the environment variable ${env} before starting the hub${info?.password ? ' (it is a secret: keep it out of the config file)' : ''}.`,
          );
        }
        return `\${env:${env}}`;
      }
      if (inner === 'workspaceFolder' && workspace) {
        notes.push(`${where}: \${workspaceFolder} was replaced by ${workspace}.`);
        return workspace;
      }
      if (inner === 'userHome') return homedir();
      notes.push(`${where}: the VS Code variable "${m}" has no hub equivalent and was kept as text; edit it.`);
      return m;
    });
  return rewrite;
}

/**
 * Claude Code expands `${VAR}` and `${VAR:-default}` in its entries: both become the hub's
 * `${env:VAR}` (the hub has no default, so a default is named in a note).
 */
function claudeCodeRewriter(notes: string[]): Rewriter {
  return (s, where) =>
    s.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g, (_m, name: string, dflt: string | undefined) => {
      // The default itself is not repeated: it may be a token.
      if (dflt !== undefined) notes.push(`${where}: "\${${name}:-…}" became "\${env:${name}}": the hub has no defaults, so set ${name} before starting it (the file gave it a default).`);
      return `\${env:${name}}`;
    });
}

/**
 * Cursor's variables: `${env:X}` is the hub's syntax already; `${userHome}` and (in a project's
 * `.cursor/mcp.json`) `${workspaceFolder}` become paths.
 */
function cursorRewriter(path: string, notes: string[]): Rewriter {
  const workspace = startFolder('cursor', path);
  return (s, where) =>
    s.replace(/\$\{([^}]*)\}/g, (m, inner: string) => {
      if (inner.startsWith('env:')) return m;
      if (inner === 'userHome') return homedir();
      if (inner === 'workspaceFolder' && workspace) {
        notes.push(`${where}: \${workspaceFolder} was replaced by ${workspace}.`);
        return workspace;
      }
      if (inner === 'workspaceFolderBasename' && workspace) return basename(workspace);
      if (inner === '/' || inner === 'pathSeparator') return sep;
      notes.push(`${where}: the Cursor variable "${m}" has no hub equivalent here and was kept as text; edit it.`);
      return m;
    });
}

/**
 * The folder the client starts this file's stdio servers in, where their relative `command`,
 * `args` and `cwd` point: the workspace of a `.vscode/mcp.json` or a project's `.cursor/mcp.json`,
 * the project of Claude Code's `.mcp.json`. Undefined for a user-level file (no one folder).
 */
function startFolder(kind: ClientKind, path: string): string | undefined {
  const dir = dirname(resolve(path));
  if (kind === 'vscode') return basename(dir) === '.vscode' ? dirname(dir) : undefined;
  if (kind === 'cursor') return basename(dir) === '.cursor' && resolve(dirname(dir)) !== resolve(homedir()) ? dirname(dir) : undefined;
  if (kind === 'claude-code') return basename(path) === '.mcp.json' ? dir : undefined;
  return undefined;
}

/** Where a stdio entry runs: the client's start folder, given as `cwd` when the hub's own default (the config's folder) differs. */
function runFolder(cwd: string | undefined, folder: string | undefined, hubDir: string | undefined, where: string, notes: string[]): string | undefined {
  if (folder === undefined) return cwd;
  if (cwd !== undefined) return resolve(folder, cwd);
  if (hubDir === undefined || resolve(hubDir) === folder) return undefined;
  notes.push(`${where} runs in ${folder} as its client started it there (its "cwd"), so relative paths in its command and args still hold.`);
  return folder;
}

function convertEntry(
  name: string,
  id: string,
  e: Record<string, unknown>,
  rewrite: Rewriter,
  notes: string[],
  warnings: string[],
  place: { folder?: string; hubDir?: string } = {},
): ImportedServer | undefined {
  const where = `server "${name}"`;
  const str = (v: unknown) => (typeof v === 'string' ? rewrite(v, where) : undefined);
  const map = (v: unknown) => {
    const m = stringMap(v);
    if (!m) return undefined;
    for (const k of Object.keys(m)) m[k] = rewrite(m[k], where);
    return m;
  };
  const type = typeof e.type === 'string' ? e.type : undefined;
  const out: ImportedServer = {};
  const url = str(e.url) ?? str(e.serverUrl);
  if (typeof e.command === 'string' && type !== 'http' && type !== 'sse') {
    out.command = str(e.command);
    if (Array.isArray(e.args)) {
      out.args = e.args.filter((a) => typeof a === 'string' || typeof a === 'number').map((a) => rewrite(String(a), where));
      const inArgs = argCredentials(out.args);
      if (inArgs.length)
        warnings.push(`${where} has secret-looking values in args (${inArgs.join(', ')}), written to the config in clear: put each in an environment variable and write "\${env:NAME}" in its place (or pass it in env, where the server reads one).`);
    }
    const env = map(e.env);
    if (env) {
      out.env = env;
      const secrets = Object.entries(env).filter(([k, v]) => SECRET_KEY.test(k) && !v.includes('${env:'));
      if (secrets.length)
        warnings.push(`${where} has secret-looking values in env (${secrets.map(([k]) => k).join(', ')}), written to the config in clear: consider "\${env:NAME}" so they stay out of the file.`);
    }
    const cwd = runFolder(str(e.cwd), place.folder, place.hubDir, where, notes);
    if (cwd !== undefined) out.cwd = cwd;
    if (typeof e.envFile === 'string') notes.push(`${where} reads an envFile (${e.envFile}); the hub does not: move those variables into env or the hub's environment.`);
  } else if (url) {
    out.url = url;
    const inUrl = urlCredentials(url);
    if (inUrl.length)
      warnings.push(
        `${where} has ${inUrl.join(' and ')} in its url, written to the config in clear: put ${inUrl.length > 1 ? 'each' : 'it'} in an environment variable and write "\${env:NAME}" in its place in the url (or, where the server takes one, send it as a header: "headers": {"Authorization": "Bearer \${env:NAME}"}).`,
      );
    const headers = map(e.headers);
    const own = headers ? Object.keys(headers).filter(setByHub) : [];
    if (headers && own.length) {
      for (const k of own) delete headers[k];
      notes.push(`${where} sets headers the hub sets on each request itself (${own.join(', ')}): they were left out.`);
    }
    if (headers && Object.keys(headers).length) {
      out.headers = headers;
      const secrets = Object.entries(headers).filter(([k, v]) => SECRET_KEY.test(k) && !v.includes('${env:'));
      if (secrets.length)
        warnings.push(`${where} has secret-looking values in headers (${secrets.map(([k]) => k).join(', ')}), written to the config in clear: consider "\${env:NAME}" so they stay out of the file.`);
    }
    if (type === 'sse') notes.push(`${where} is an SSE (2024-11-05) server; the hub connects to it with Streamable HTTP, which most such servers also serve.`);
  } else {
    notes.push(`${where} was skipped: it has neither a command nor a url.`);
    return undefined;
  }
  if (e.disabled === true || e.enabled === false) out.enabled = false;
  // Cline's and Roo Code's per-server timeout, in seconds.
  if (typeof e.timeout === 'number' && Number.isFinite(e.timeout) && e.timeout > 0) out.timeoutMs = Math.min(Math.round(e.timeout * 1000), MAX_TIMEOUT_MS);
  // Tools the client ran without asking (Cline's autoApprove, Roo Code's alwaysAllow): the client
  // still asks, for the hub's names of them, unless its entry for the hub lists those.
  const approved = [e.autoApprove, e.alwaysAllow].find((v): v is unknown[] => Array.isArray(v) && v.length > 0);
  if (approved) {
    const names = approved.filter((t): t is string => typeof t === 'string').map((t) => `${id}__${t}`);
    notes.push(`${where}: its client ran ${names.length === 1 ? 'one tool' : 'these tools'} without asking; through the hub ${names.length === 1 ? 'it is' : 'they are'} ${names.join(', ')}: list ${names.length === 1 ? 'that name' : 'those names'} in the client's entry for the hub to keep it so (the hub itself asks before no call unless policy.confirm names it).`);
  }
  return out;
}

/** A command-line flag whose name says its value is a credential (`--api-key`, `--token=…`, `-password`). */
const SECRET_FLAG = /^--?[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|secret|token|api[-_]?key|auth(?:orization)?|cookie|credentials?)$/i;

/**
 * Which args hold a credential written literally, by position (`args[2]`), never the value: the
 * value after a flag that names one (`--api-key sk-…`, `--token=…`), and any arg a credential
 * rule of log text finds (a known token shape, `password=…`, a URL's password). An `${env:…}`
 * reference is none.
 */
export function argCredentials(args: readonly string[]): string[] {
  const found = new Set<number>();
  const literal = (v: string | undefined) => v !== undefined && v !== '' && !v.includes('${env:');
  args.forEach((a, i) => {
    const eq = a.indexOf('=');
    if (a.startsWith('-') && eq > 0 && SECRET_FLAG.test(a.slice(0, eq)) && literal(a.slice(eq + 1))) found.add(i);
    else if (SECRET_FLAG.test(a) && literal(args[i + 1]) && !args[i + 1]!.startsWith('-')) found.add(i + 1);
    if (literal(a) && redactLogText(a) !== a) found.add(i);
  });
  return [...found].sort((x, y) => x - y).map((i) => `args[${i}]`);
}

/**
 * What in a server's url is a credential (as secret-values.ts counts it: the user info, a query
 * parameter whose name says so), named by where it is; a part that is a `${env:…}` reference
 * already is none. Never the values themselves: the caller's words are printed.
 */
export function urlCredentials(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return [];
  }
  const decoded = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  };
  const literal = (s: string) => s !== '' && !decoded(s).includes('${env:');
  const found: string[] = [];
  if (literal(u.password)) found.push('a password (its user info)');
  else if (!u.password && literal(u.username)) found.push('a user name that may be a token (its user info)');
  const params = [...new Set([...u.searchParams].filter(([k, v]) => SECRET_NAME.test(k) && literal(v)).map(([k]) => k))];
  if (params.length) found.push(`a secret-looking query parameter (${params.join(', ')})`);
  return found;
}

/**
 * An entry that runs Switchyard's bridge or stdio hub: `npx switchyard stdio`, a global install,
 * or the form README offers where neither is, `node /path/to/<clone>/dist/src/cli/main.js
 * connect`, whose clone folder need not be named switchyard. Imported, the hub would spawn a hub
 * (on the same config, each one the next) or bridge to itself.
 */
const SELF = /(switchyard\S*|[\\/]dist[\\/]src[\\/]cli[\\/]main\.js)\s+(stdio|connect)\b/;

/**
 * Parses a client config file's text into hub servers, with notes for the user. `hubDir` is the
 * folder of the hub config being written (its stdio servers' default working folder).
 */
export function importClientConfig(text: string, path: string, hubDir?: string): ImportResult {
  let doc: unknown;
  try {
    // Never V8's own message: it quotes a slice of the file, which may hold a token.
    doc = parseJsonText(stripJsonc(text.replace(/^\uFEFF/, '')));
  } catch (err) {
    throw new ImportError(`${path} is ${(err as Error).message}`);
  }
  if (!isObj(doc)) throw new ImportError(`${path}: expected a JSON object`);
  const kind = detectKind(doc, path);
  const list = kind === 'vscode' ? doc.servers : doc.mcpServers;
  if (!isObj(list) && !(kind === 'claude-code' && isObj(doc.projects))) throw new ImportError(`${path}: no "mcpServers" or "servers" object found`);
  const notes: string[] = [];
  const warnings: string[] = [];
  const inputs = new Map<string, { description?: string; password?: boolean }>();
  if (Array.isArray(doc.inputs))
    for (const i of doc.inputs)
      if (isObj(i) && typeof i.id === 'string') inputs.set(i.id, { description: typeof i.description === 'string' ? i.description : undefined, password: i.password === true });
  const rewrite: Rewriter =
    kind === 'vscode' ? vscodeRewriter(path, inputs, notes) : kind === 'claude-code' ? claudeCodeRewriter(notes) : kind === 'cursor' ? cursorRewriter(path, notes) : (s) => s;
  const taken = new Set<string>();
  const servers: Record<string, ImportedServer> = {};
  // ~/.claude.json keeps each project's own servers under projects["/path"].mcpServers.
  const fileFolder = startFolder(kind, path);
  const entries: [string, unknown, string | undefined][] = isObj(list) ? Object.entries(list).map(([n, e]) => [n, e, fileFolder]) : [];
  if (kind === 'claude-code' && isObj(doc.projects))
    for (const [project, p] of Object.entries(doc.projects))
      if (isObj(p) && isObj(p.mcpServers))
        for (const [name, entry] of Object.entries(p.mcpServers)) {
          notes.push(`server "${name}" comes from the project ${project} (Claude Code starts it only there; the hub serves it everywhere).`);
          entries.push([name, entry, resolve(project)]);
        }
  for (const [name, entry, folder] of entries) {
    if (!isObj(entry)) {
      notes.push(`server "${name}" was skipped: not an object.`);
      continue;
    }
    const argv = [entry.command, ...(Array.isArray(entry.args) ? entry.args : [])].map(String).join(' ');
    if (name.toLowerCase() === 'switchyard' || SELF.test(argv)) {
      notes.push(`server "${name}" looks like Switchyard itself and was skipped (the hub would connect to itself).`);
      continue;
    }
    const id = serverId(name, taken);
    if (id !== name) notes.push(`server "${name}" is "${id}" in the hub (ids are letters, digits and "-").`);
    const s = convertEntry(name, id, entry, rewrite, notes, warnings, { folder, hubDir });
    if (s) servers[id] = s;
  }
  // The client gave its servers its own whole environment; the hub gives a baseline, so a server
  // that read, say, AWS_PROFILE or a token exported in the shell would start without it.
  const stdio = Object.entries(servers).filter(([, s]) => s.command !== undefined).map(([id]) => id);
  if (stdio.length)
    notes.push(
      `${stdio.join(', ')}: a stdio server gets only a baseline of the hub's environment (PATH, HOME, USER, SHELL, LANG, TZ, TMPDIR …), not the client's whole one: name what one reads in its "inheritEnv" (["AWS_*"]), or set it in "env".`,
    );
  return { kind, servers, notes, warnings };
}
