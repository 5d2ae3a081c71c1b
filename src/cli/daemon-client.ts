/**
 * Where CLI commands find a running daemon (--url, or the config's `listen`) and the errors
 * `withDaemon` turns into exit codes; the requests themselves are admin-request.ts's.
 */
import { existsSync, lstatSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Argv } from 'yargs';
import { parseJsonText } from '../config/load.js';
import { daemonRecordFile, runningDaemonRecord } from './daemon-record.js';
import { socketPathProblem } from '../socket-path.js';

/** What every command that talks to the daemon takes. */
export interface DaemonArgs {
  config: string;
  url?: string;
  json: boolean;
}

/** What `--url` is, in the help of every command that asks the daemon (`tools` and its export too). */
export const URL_DESCRIBE = 'The daemon address, e.g. http://127.0.0.1:7410, or unix:PATH for an admin socket (default: from the config, its listen.admin first)';

/** `--config` (where the daemon's address is read), `--url` and `--json`, as every daemon command has them. */
export function daemonOptions(y: Argv, describe: { config?: string; json?: string } = {}): Argv<DaemonArgs> {
  return y
    .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: describe.config ?? 'Config file (for the daemon address)' })
    .option('url', { type: 'string', describe: URL_DESCRIBE })
    .option('json', { type: 'boolean', default: false, describe: describe.json ?? 'Print JSON' }) as Argv<DaemonArgs>;
}

export class NoDaemonError extends Error {}
export class DaemonError extends Error {}

/**
 * A switchyard daemon refused what the command asked, in words of its own (`no server "nope"
 * is running`): those come first, the status and the daemon's address last, for a bug report.
 * Said as the command's (daemonErrorLine): the daemon's words alone do not say who speaks.
 */
export class DaemonRefusal extends DaemonError {}

/**
 * Something took the connection and gave no answer: none in time, or the connection broke. Said
 * as a refusal is, what happened first and the address last (`switchyard reload: no answer within
 * 120 s [at http://127.0.0.1:7410]`), not led by the admin route.
 */
export class NoAnswerError extends DaemonError {}

/**
 * The line a command prints for `err`, as the command's own (`switchyard servers restart: …`):
 * a refusal, no answer, no daemon there (exit 3), another program, a key refused, each said like
 * the next, and like the command's other errors.
 */
export function daemonErrorLine(err: Error, command: string): string {
  return `switchyard ${command}: ${err.message}\n`;
}

/**
 * A command's exchange with the daemon: a daemon that is not there (exit 3) or that answers
 * with an error (exit 1) is one line on stderr; anything else is thrown on. `command` as the
 * user typed it (`servers restart`), to say a refusal as its own.
 */
export async function withDaemon(command: string, work: () => Promise<void>): Promise<void> {
  try {
    await work();
  } catch (err) {
    if (!(err instanceof NoDaemonError || err instanceof DaemonError)) throw err;
    process.stderr.write(daemonErrorLine(err, command));
    process.exitCode = err instanceof NoDaemonError ? 3 : 1;
  } finally {
    for (const note of takeDaemonNotes()) process.stderr.write(`switchyard ${command}: note: ${note}\n`);
  }
}

import { UsageError } from './usage-error.js';

/** The name `--config` has when it is not given. */
const DEFAULT_CONFIG = 'hub.config.json';

/** `s` as an http(s) URL, or undefined when it is none (the check every `--url` gets). */
export function httpUrl(s: string): URL | undefined {
  try {
    const u = new URL(s);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u : undefined;
  } catch {
    return undefined;
  }
}

/** A daemon base naming the admin socket (listen.admin.path): `unix:` and the socket's path. */
export const UNIX_BASE = 'unix:';

/** The socket path of a `unix:` base, or undefined for an http(s) one. */
export function socketOf(base: string): string | undefined {
  return base.startsWith(UNIX_BASE) ? base.slice(UNIX_BASE.length) : undefined;
}

/**
 * The daemon's admin address: a base URL (no path) or `unix:<socket path>`, from --url (a base,
 * the /mcp endpoint, or unix:<path>) or the config: its admin listener (listen.admin), where a
 * flood of MCP connections cannot crowd the CLI out, else its listen address.
 */
export function daemonBase(url: string | undefined, configFile: string): string {
  if (url !== undefined) {
    // `--url` as the last word (or before another option), or a script's unset variable: yargs
    // reads it as ''. Said as a URL that is none ('got ""'), it sent the user looking for a value no one typed.
    if (url === '') throw new UsageError("--url needs a value: the daemon's address, such as http://127.0.0.1:7410 (or unix: and the admin socket's path); leave the option out to read it from the config");
    if (url.startsWith(UNIX_BASE) && url.length > UNIX_BASE.length) {
      const path = resolve(url.slice(UNIX_BASE.length));
      // A connect cuts a longer path short and finds nothing there: "no daemon", wrongly.
      const long = socketPathProblem(path);
      if (long) throw new UsageError(`--url: ${long}`);
      return UNIX_BASE + path;
    }
    const u = httpUrl(url);
    if (!u) throw new UsageError(`--url must be an http(s) URL such as http://127.0.0.1:7410 (or unix: and the admin socket's path), got ${JSON.stringify(url)}`);
    return u.origin;
  }
  let host = '127.0.0.1';
  let port = 7410;
  const file = resolve(configFile);
  // A file named on purpose and not there is a typo: knocking on the default address instead
  // would say "no daemon" (or reach another one).
  if (!existsSync(file) && configFile !== DEFAULT_CONFIG)
    throw new UsageError(`${configFile}: no such config file: give the config the daemon runs with, or its address with --url`);
  if (existsSync(file)) {
    // As the daemon reads it (a byte-order mark is no reason to knock on another daemon's port).
    const cfg = listenOf(file, configFile);
    // A host from the environment is not known here (the default one is asked).
    const knownHost = !(typeof cfg.listen?.host === 'string' && cfg.listen.host.includes('${'));
    const recorded = (base: string): string => {
      const ledgerPath = cfg.ledger?.path ?? DEFAULT_LEDGER_PATH;
      // A path from the environment: where the daemon's state is cannot be told from the file alone.
      if (typeof ledgerPath === 'string' && !ledgerPath.includes('${'))
        RECORDS.set(base, { file: daemonRecordFile(ledgerPath === ':memory:' ? ledgerPath : resolve(dirname(file), ledgerPath), file), config: file, configFile, listen: { host: knownHost ? host : undefined, port } });
      return base;
    };
    try {
      if (typeof cfg.listen?.host === 'string' && !cfg.listen.host.includes('${')) host = cfg.listen.host;
      if (typeof cfg.listen?.port === 'number') port = cfg.listen.port;
      const admin = cfg.listen?.admin;
      // As the daemon reads it: relative to the config file's folder.
      if (typeof admin?.path === 'string' && admin.path !== '' && !admin.path.includes('${')) {
        const base = UNIX_BASE + resolve(dirname(file), admin.path);
        CONFIG_OWNERS.set(base, { uid: statSync(file).uid, file });
        return recorded(withFallback(base, httpBase(host, port)));
      }
      if (typeof admin?.port === 'number') {
        const adminHost = typeof admin.host === 'string' && !admin.host.includes('${') ? admin.host : '127.0.0.1';
        return recorded(withFallback(httpBase(adminHost, admin.port), httpBase(host, port)));
      }
    } catch {
      // the file gone since it was read (statSync): the address read so far is the best guess
    }
    return recorded(httpBase(host, port));
  }
  return httpBase(host, port);
}

/** ledger.path when the config does not give one (the schema's default). */
const DEFAULT_LEDGER_PATH = './data/ledger.db';

/** Bases read from a config → where the daemon of that config records its address (daemon-record.ts). */
const RECORDS = new Map<string, { file: string; config: string; configFile: string; listen: { host: string | undefined; port: number } }>();

/** Bases read from a config → where its daemon was found instead (daemonElsewhere), asked there from then on, and what to say of it. */
const MOVED = new Map<string, { at: string; note: string | undefined }>();

/** What the commands say beside their output of a daemon found elsewhere (takeDaemonNotes), each once. */
const NOTES = new Set<string>();

/**
 * Where the daemon of `base`'s config was found instead, once it was (asked there directly); its
 * note is said again by the command that asks (several run in one process: test/fixtures/cli-batch.mjs).
 */
export function movedTo(base: string): string | undefined {
  const moved = MOVED.get(base);
  if (moved?.note) NOTES.add(moved.note);
  return moved?.at;
}

/**
 * When nothing answers at `base` (and its fallback), read from a config: the addresses the
 * daemon running with that config recorded, admin listener first, those not asked already. A
 * daemon keeps the listen it started with until it restarts, so after an edit of listen.port
 * the config names an address where it is not. Undefined when no such daemon runs.
 */
export function daemonElsewhere(base: string): { bases: string[]; found(at: string): void } | undefined {
  const rec = RECORDS.get(base);
  if (!rec) return undefined;
  let uid: number;
  try {
    uid = statSync(rec.config).uid;
  } catch {
    return undefined;
  }
  const r = runningDaemonRecord(rec.file, rec.config, uid);
  if (!r) return undefined;
  const bases: string[] = [];
  if (r.admin && 'path' in r.admin) {
    const socket = UNIX_BASE + r.admin.path;
    // As a socket the config names: asked only if it is this user's, root's or the config owner's.
    CONFIG_OWNERS.set(socket, { uid, file: rec.config });
    bases.push(socket);
  } else if (r.admin) bases.push(httpBase(r.admin.host, r.admin.port));
  bases.push(httpBase(r.listen.host, r.listen.port));
  const tried = [base, fallbackOf(base)];
  return {
    bases: bases.filter((b) => !tried.includes(b)),
    found: (at) => {
      // Port 0 (any free port): the record is the only place its address is told, and no edit to speak of.
      const note = base.endsWith(':0')
        ? undefined
        : r.fileListen && !edited(r.fileListen, rec.listen)
          ? `the daemon of ${rec.configFile} (pid ${r.pid}) listens at ${at}, as start's --host or --port said, not at ${base} where the file says (--url ${at} asks it there directly)`
          : `the daemon of ${rec.configFile} (pid ${r.pid}) listens at ${at}, not at ${base} where the file now says: it applies a change of listen when it restarts (until then give --url ${at}, or restart it)`;
      MOVED.set(base, { at, note });
      if (note) NOTES.add(note);
    },
  };
}

/** Whether the file's listen now (a host from the environment unknown) differs from what it was when the daemon started. */
function edited(then: { host: string; port: number }, now: { host: string | undefined; port: number }): boolean {
  return then.port !== now.port || (now.host !== undefined && then.host !== now.host);
}

/** The notes of daemons found elsewhere since the last call, each once. */
export function takeDaemonNotes(): string[] {
  const notes = [...NOTES];
  NOTES.clear();
  return notes;
}

/** The config file is there but gives no daemon address (listenOf): a usage error, exit 2. */
export class NoAddressInConfig extends UsageError {}

type ListenPart = { listen?: { host?: unknown; port?: unknown; admin?: { path?: unknown; host?: unknown; port?: unknown } }; ledger?: { path?: unknown } };

/**
 * The config file's JSON, for its listen address. A file that is there but says no address (not
 * JSON, mid-edit; a folder; a listen or listen.port of the wrong type) is a usage error: the default address
 * guessed instead said "no switchyard daemon is running" (exit 3, "start one") of a daemon that
 * runs elsewhere with the config as it was before the edit, and would be sent the admin key.
 * The problem is located, never quoted (parseJsonText): the file may hold a literal secret.
 */
function listenOf(file: string, configFile: string): ListenPart {
  const unknown = (why: string) =>
    new NoAddressInConfig(`${configFile}: ${why}: the daemon's address is read from it; fix the file, or give the address with --url`);
  let cfg: unknown;
  try {
    cfg = parseJsonText(readFileSync(file, 'utf8'));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw unknown(code ? `cannot read it (${code})` : (e as Error).message);
  }
  if (typeof cfg !== 'object' || cfg === null || Array.isArray(cfg)) throw unknown('not a JSON object');
  const listen = (cfg as ListenPart).listen;
  if (listen !== undefined && (typeof listen !== 'object' || listen === null || Array.isArray(listen))) throw unknown('listen is no object (such as {"port": 7410})');
  const port = (cfg as ListenPart).listen?.port;
  if (port !== undefined && !(Number.isInteger(port) && (port as number) >= 0 && (port as number) <= 65535)) throw unknown('listen.port is no port number');
  return cfg as ListenPart;
}

function httpBase(host: string, port: number): string {
  // A wildcard bind is reached over loopback.
  if (host === '0.0.0.0') host = '127.0.0.1';
  if (host === '::') host = '::1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Admin bases read from a config (listen.admin) → the config's main listener. listen is
 * restart-only: a daemon started before listen.admin was added to its config has no admin
 * listener yet, but serves the admin routes on its main one, where `reload` and the rest
 * must still reach it (admin-request.ts asks there when nothing listens at the admin base).
 */
const FALLBACKS = new Map<string, string>();

function withFallback(admin: string, main: string): string {
  // Port 0 (any free port): the main listener has no address to find it at.
  if (!main.endsWith(':0')) FALLBACKS.set(admin, main);
  return admin;
}

/** Where to ask when no daemon listens at `base`: the main listener of the config that named it as the admin one. */
export function fallbackOf(base: string): string | undefined {
  return FALLBACKS.get(base);
}

/** Admin socket bases read from a config → that config file's owner (a user who may run its hub). */
const CONFIG_OWNERS = new Map<string, { uid: number; file: string }>();

/**
 * Why the CLI does not ask the socket a config named (listen.admin.path), or undefined: it
 * belongs to a user who is neither this one, root, nor the config file's owner. While the hub
 * is stopped its path is free, and in a folder others may write (/tmp) another user's program
 * can listen there: it would be sent the admin key (SWITCHYARD_API_KEY) and trusted for its
 * answers. A socket named with --url unix:PATH is asked as named.
 */
export function foreignSocket(base: string): string | undefined {
  const owner = CONFIG_OWNERS.get(base);
  const path = socketOf(base);
  const me = process.getuid?.();
  if (owner === undefined || path === undefined || me === undefined) return undefined;
  let uid: number;
  try {
    uid = lstatSync(path).uid;
  } catch {
    return undefined; // not there: connecting says so
  }
  if (uid === me || uid === 0 || uid === owner.uid) return undefined;
  return `${base}: the admin socket belongs to uid ${uid}, neither this user, root nor the owner of ${owner.file}, so it was not asked (another user's program may listen there while the hub is stopped); give --url ${base} to ask it anyway`;
}
