import { inFlightNote, screenJson, screenText } from '../ledger/format.js';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Argv, CommandModule } from 'yargs';
import { adminExposureProblem, configExposureProblem } from '../auth/exposure.js';
import { badPortWarnings } from './fetch-bad-ports.js';
import { ConfigError, loadConfig } from '../config/load.js';
import { configProblemLines } from './config-problems.js';
import type { HubConfig } from '../config/types.js';
import { errorWithStderr, type ServerView, type ToolView } from '../downstream/admin-views.js';
import { openLedgerDb } from '../ledger/db.js';
import { readItemPins } from '../ledger/pins.js';
import type { PinRecord } from '../catalog/pins.js';
import { loadMigrations, schemaVersion } from '../ledger/migrate.js';
import { LedgerReader } from '../ledger/reader.js';
import { serversAnswer, toolsAnswer } from './admin-answers.js';
import { AdminKeyRefused, AdminListenerElsewhere, BadPortError, getJson, OtherProgramError } from './admin-request.js';
import { ledgerDbPath, ledgerUnwritable, ledgerWriter, linkedLedger } from './ledger-lock.js';
import { daemonBase, daemonElsewhere, daemonOptions, movedTo, NoAddressInConfig, NoDaemonError, takeDaemonNotes, type DaemonArgs } from './daemon-client.js';
import { LOCAL_START_MS, lookLocally } from './local-catalog.js';
import { ignoredSettings } from '../config/ignored-settings.js';
import { Groups } from '../catalog/filters.js';
import { loginFindings } from './login-state.js';
import { oauthProblem } from './config.js';
import { counted } from '../counted.js';

type DoctorArgs = DaemonArgs;

export type Level = 'ok' | 'warn' | 'fail';
export interface Finding {
  level: Level;
  check: string;
  message: string;
}

/**
 * Tool caps of common clients: more tools than this in one endpoint and they drop or refuse some.
 * VS Code: 128 tools per chat request; Windsurf: Cascade has at most 100 tools at any time (both
 * as their own documentation states).
 */
export const CLIENT_TOOL_CAPS: { client: string; max: number }[] = [
  { client: 'VS Code', max: 128 },
  { client: 'Windsurf', max: 100 },
];

/**
 * Tool count per endpoint: the whole catalog, and each configured group, counted as the hub
 * shows it (catalog/filters.ts: servers, tool globs, `deny`; `prefixOf` a server's prefix, for
 * the deny globs a renamed tool meets by its name before renaming).
 */
export function toolCaps(tools: ToolView[], groups: Record<string, unknown> | undefined, prefixOf: (server: string) => string | undefined = () => undefined): Finding[] {
  const out: Finding[] = [];
  const check = (label: string, n: number) => {
    const over = CLIENT_TOOL_CAPS.filter((c) => n > c.max);
    if (over.length)
      out.push({
        level: 'warn',
        check: 'tool caps',
        message: `${label} exposes ${counted(n, 'tool')}, over the cap of ${over.map((c) => `${c.client} (${c.max})`).join(' and ')}: split it into groups`,
      });
    else out.push({ level: 'ok', check: 'tool caps', message: `${label} exposes ${counted(n, 'tool')} (within ${CLIENT_TOOL_CAPS.map((c) => `${c.client} ${c.max}`).join(', ')})` });
  };
  check('the default endpoint', tools.length);
  const shown = new Groups(groups);
  for (const name of shown.names()) check(`group "${name}"`, tools.filter((t) => shown.includes(name, 'tools', t.server, t.name, t.upstreamName, prefixOf(t.server))).length);
  return out;
}

/**
 * `waitedMs`: the servers were started here and given that long; one still starting then did not
 * come up in that time (say an `npx -y` first run still downloading), which "is starting" hid.
 */
export function upstreamFindings(servers: ServerView[], waitedMs?: number): Finding[] {
  if (servers.length === 0) return [{ level: 'warn', check: 'upstreams', message: 'no enabled servers in the config' }];
  return servers.map((s): Finding => {
    const what = `${s.id} (${s.transport}${s.era ? `, ${s.era}` : ''})`;
    if (s.state === 'ready' && s.listError) return { level: 'warn', check: 'upstreams', message: `${what} ready, but clients see none of a list: ${s.listError}` };
    if (s.state === 'ready') return { level: 'ok', check: 'upstreams', message: `${what} ready${s.restarts ? `, ${s.restarts} restart(s)` : ''}` };
    if (s.state === 'starting' && waitedMs !== undefined)
      return {
        level: 'fail',
        check: 'upstreams',
        message: `${what} was not ready after ${waitedMs / 1000} s${s.lastError ? ` (last attempt: ${errorWithStderr(s)})` : ' (no answer to the handshake yet: a first `npx -y` or `uvx` run may still be downloading it; run the command by hand to see)'}`,
      };
    return { level: 'fail', check: 'upstreams', message: `${what} is ${s.state}${s.lastError ? `: ${errorWithStderr(s)}` : ''}` };
  });
}

/**
 * `local`: the tools were listed here, no daemon running, and that look writes nothing to the
 * ledger (local-catalog.ts): a changed definition it holds back is in no pin's pending change,
 * so `tools diff` said "no pending change" and `tools approve` "nothing to approve" to the user
 * this line sent there.
 */
export function toolFindings(tools: ToolView[], local = false): Finding[] {
  const out: Finding[] = [];
  const renamed = tools.filter((t) => t.flags.some((f) => f.startsWith('renamed')));
  // Dropped tools too (an x-mcp-header or schemas no client can read): a server lists them, no client sees them.
  const dropped = (t: ToolView) => t.hidden?.startsWith('dropped:') === true;
  const held = tools.filter((t) => dropped(t) || t.flags.some((f) => f === 'quarantined' || f.startsWith('quarantined:') || f.startsWith('pin:')));
  for (const t of renamed)
    out.push({ level: 'warn', check: 'tool names', message: `${t.server}/${t.upstreamName} is "${t.name}" for clients (${t.flags.filter((f) => f.startsWith('renamed')).join(', ')})` });
  const unrecorded = (t: ToolView) => local && t.flags.some((f) => f.startsWith('pin:'));
  for (const t of held)
    out.push({
      level: 'warn',
      check: 'quarantine',
      message: `${t.name} (${t.server}) is held back: ${dropped(t) ? t.hidden : t.flags.join(', ')}${unrecorded(t) ? ' (seen by this check, which records nothing: once the hub has run and listed it, `switchyard tools diff` shows the change and `tools approve` takes it)' : ''}`,
    });
  if (!renamed.length) out.push({ level: 'ok', check: 'tool names', message: 'no tool had to be renamed' });
  if (!held.length) out.push({ level: 'ok', check: 'quarantine', message: 'no tool is quarantined' });
  return out;
}

/**
 * Who may hold the ledger's writer lock without it being a problem: the daemon doctor talked to
 * (its pid), or 'unknown' when a switchyard daemon answered but did not say (it wants an admin key).
 */
export type LockOwner = number | 'unknown' | undefined;

/**
 * The ledger as `start` needs it: no other live hub holds its lock (looked at only: a running
 * hub's lock is never taken or broken), its folder can be created and written and the file (if
 * there) is writable by this user (unless the daemon doctor talks to writes it), it has one
 * name; then its hash chain, read-only.
 */
export function ledgerFinding(config: HubConfig, daemonPid?: LockOwner): Finding {
  if (!config.ledger.enabled) return { level: 'warn', check: 'ledger', message: 'the ledger is disabled: no audit trail, no idempotency' };
  const path = ledgerDbPath(config);
  const fail = (why: string): Finding => ({ level: 'fail', check: 'ledger', message: `${why}: \`switchyard start\` would refuse it` });
  const holder = ledgerWriter(path);
  if (holder && holder.pid !== daemonPid) {
    const who = `pid ${holder.pid}${holder.command ? `, ${holder.command}` : ''}`;
    // A daemon answered at the config's address but did not give its pid: most likely the holder.
    if (daemonPid === 'unknown') return { level: 'warn', check: 'ledger', message: `${path} is written by ${who}, presumably the daemon that wants an admin key; not read here` };
    return fail(`${path} is in use by another switchyard process (${who})`);
  }
  // The daemon writing it needs nothing more (it may run as another user than this doctor).
  const unwritable = holder ? undefined : ledgerUnwritable(path);
  if (unwritable) return fail(unwritable);
  const linked = linkedLedger(path);
  if (linked) return fail(linked.message);
  if (!existsSync(path)) return { level: 'ok', check: 'ledger', message: `${path} does not exist yet (created at the first start)` };
  try {
    // An older Switchyard's ledger is no problem for start, which upgrades it: read as it is.
    const db = openLedgerDb({ path, readonly: true, readsOlder: true });
    try {
      const v = new LedgerReader(db).verify();
      const version = schemaVersion(db);
      const newest = loadMigrations().length;
      const upgrade = version < newest ? `; at schema version ${version}, which this Switchyard's start upgrades to ${newest} (an older Switchyard then refuses it)` : '';
      return v.ok
        ? { level: 'ok', check: 'ledger', message: `${path}: hash chain verified (${counted(v.rows, 'row')})${v.inFlight.rows ? `; ${inFlightNote(v.inFlight)}` : ''}${upgrade}` }
        : { level: 'fail', check: 'ledger', message: `${path}: chain broken at row ${v.rowId ?? '?'}: ${v.reason}` };
    } finally {
      db.close();
    }
  } catch (err) {
    return { level: 'fail', check: 'ledger', message: `${path}: ${(err as Error).message}` };
  }
}

/** Past this many, held prompts and templates are counted, not named. */
const HELD_NAMED = 20;

/**
 * Prompts and templates with a change waiting for approval (item_pins, read from the
 * ledger file: the daemon's tool view has tools only). Nothing when there is none, or no ledger.
 */
export function heldItemFindings(config: HubConfig): Finding[] {
  if (!config.ledger.enabled) return [];
  const path = ledgerDbPath(config);
  if (!existsSync(path)) return [];
  let held: PinRecord[];
  try {
    const db = openLedgerDb({ path, readonly: true, readsOlder: true });
    try {
      // Only what a list would hold back: a listed resource is not pinned (a row of one was
      // written by the builds that pinned them), and a server gone from the config holds
      // nothing back (its pins are kept, docs/CATALOG.md, and its pending changes with them).
      held = readItemPins(db).filter((r) => r.pendingHash !== null && r.kind !== 'resources' && Object.hasOwn(config.servers, r.server));
    } finally {
      db.close();
    }
  } catch {
    return []; // ledgerFinding says what is wrong with the file
  }
  const word = { prompts: 'prompt', resources: 'resource', resourceTemplates: 'template' } as const;
  const state = (config.policy?.pinning ?? 'block') === 'block' ? 'is held back' : 'is shown flagged (pinning: warn)';
  const out: Finding[] = held.slice(0, HELD_NAMED).map((r) => ({
    level: 'warn',
    check: 'quarantine',
    message: `${word[r.kind!]} ${r.server}/${r.tool} ${state}: ${r.pendingReason === 'renamed' ? `the approved definition of "${r.renamedFrom}" under a new name` : 'changed since it was approved'} (switchyard tools diff)`,
  }));
  if (held.length > HELD_NAMED) out.push({ level: 'warn', check: 'quarantine', message: `and ${held.length - HELD_NAMED} more prompts or templates held back` });
  return out;
}

function portFree(host: string, port: number): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolveFree) => {
    const srv = createServer();
    srv.once('error', (err: NodeJS.ErrnoException) => resolveFree(err));
    srv.listen(port, host, () => srv.close(() => resolveFree(null)));
  });
}

type DaemonServers = { servers: ServerView[]; disabled?: string[]; pid?: number; version?: string };

/**
 * The daemon's servers against the config's: doctor checks the config it is given and the
 * upstreams of the daemon it finds, and a daemon of another config file on that port (or one
 * that has not loaded an edit) would have them pass as one hub's. Undefined when they agree.
 */
function otherConfigFinding(config: HubConfig, configFile: string, daemon: DaemonServers, base: string): Finding | undefined {
  const theirs = new Set([...daemon.servers.map((s) => s.id), ...(daemon.disabled ?? [])]);
  const extra = [...theirs].filter((id) => !Object.hasOwn(config.servers, id));
  const missing = Object.keys(config.servers).filter((id) => !theirs.has(id));
  if (extra.length === 0 && missing.length === 0) return undefined;
  const said = [
    ...(extra.length ? [`runs ${extra.join(', ')}, which ${configFile} does not name`] : []),
    ...(missing.length ? [`has none of ${configFile}'s ${missing.join(', ')}`] : []),
  ];
  return {
    level: 'warn',
    check: 'daemon',
    message: `the daemon at ${base} ${said.join(', and ')}: it serves another config file, or has not loaded an edit of this one (\`switchyard reload\`); the upstreams below are the daemon's`,
  };
}

/**
 * The daemon's view when one answers at `base`; 'locked' when a switchyard daemon runs there
 * but wants an admin key (its upstreams are its own: none is started here to check them);
 * otherwise whether its port is free (config given).
 */
async function findDaemon(base: string, config: HubConfig | undefined, findings: Finding[]): Promise<DaemonServers | 'locked' | undefined> {
  try {
    const daemon = await getJson(base, '/admin/servers', serversAnswer, { timeoutMs: 5_000 });
    findings.push({ level: 'ok', check: 'daemon', message: `switchyard ${daemon.version ?? ''} running at ${movedTo(base) ?? base} (pid ${daemon.pid ?? '?'})` });
    // Found where it recorded it is, not where the config says (its listen edited since it started).
    for (const note of takeDaemonNotes()) findings.push({ level: 'warn', check: 'daemon', message: note });
    return daemon;
  } catch (err) {
    if (err instanceof AdminKeyRefused || err instanceof AdminListenerElsewhere) {
      findings.push({ level: 'fail', check: 'daemon', message: err.message });
      const how = err instanceof AdminKeyRefused ? 'with its admin key in SWITCHYARD_API_KEY' : 'at its admin listener';
      findings.push({ level: 'warn', check: 'upstreams', message: `not checked: the daemon runs them (${how}, doctor asks it)` });
      return 'locked';
    }
    if (err instanceof BadPortError) {
      // Nothing could be asked there, a daemon or not: its upstreams are not started a second time on a guess.
      findings.push({ level: 'fail', check: 'daemon', message: err.message });
      findings.push({ level: 'warn', check: 'upstreams', message: `not checked: a daemon at ${base} could not be asked whether it runs them` });
      return 'locked';
    }
    if (err instanceof OtherProgramError) {
      // Not ours: the upstreams are checked here, as with no daemon at all.
      findings.push({ level: 'fail', check: 'daemon', message: (err as Error).message });
      return undefined;
    }
    if (!(err instanceof NoDaemonError)) {
      // Something answered JSON, or did not answer in time: it may be our daemon, busy or
      // refusing in a way not recognised, so its upstreams are not started a second time.
      findings.push({ level: 'fail', check: 'daemon', message: `${(err as Error).message} (a switchyard daemon that is busy, or another program?)` });
      findings.push({ level: 'warn', check: 'upstreams', message: `not checked: something answers at ${base}, perhaps a daemon running them` });
      return 'locked';
    }
    // With no usable config there are no upstreams to check either.
    findings.push({ level: 'ok', check: 'daemon', message: `no daemon at ${base}${config ? '; checking the upstreams directly' : ''}` });
    if (!config) return undefined;
    const { host, port } = config.listen;
    const e = await portFree(host, port);
    if (e?.code === 'EADDRINUSE') findings.push({ level: 'fail', check: 'port', message: `${host}:${port} is in use by another program: \`switchyard start\` would fail` });
    else if (e) findings.push({ level: 'fail', check: 'port', message: `cannot listen on ${host}:${port}: ${e.code ?? e.message}` });
    else findings.push({ level: 'ok', check: 'port', message: `${host}:${port} is free` });
    return undefined;
  }
}

/** Runs every check; never throws for a problem it finds. */
export async function diagnose(configFile: string, url: string | undefined): Promise<Finding[]> {
  const findings: Finding[] = [];
  let config: HubConfig | undefined;
  try {
    config = loadConfig(configFile);
    // As start and config validate judge it (auth/exposure.ts): a config start refuses is not ok here.
    const exposed = configExposureProblem(config);
    const adminExposed = adminExposureProblem(config);
    const oauth = exposed || adminExposed ? undefined : await oauthProblem(config);
    if (exposed) findings.push({ level: 'fail', check: 'config', message: `${configFile}: listen.host: ${exposed}` });
    else if (adminExposed) findings.push({ level: 'fail', check: 'config', message: `${configFile}: listen.admin.host: ${adminExposed}` });
    // As start refuses it (an unreadable jwksFile): not ok here either.
    else if (oauth) findings.push({ level: 'fail', check: 'config', message: `${configFile}: ${oauth}` });
    else findings.push({ level: 'ok', check: 'config', message: `${configFile}: ${counted(Object.keys(config.servers).length, 'server')}` });
    for (const m of [...ignoredSettings(config), ...badPortWarnings(config)]) findings.push({ level: 'warn', check: 'config', message: m });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    // Each named as the file's, as its other findings and start's and config validate's lines are.
    for (const p of configProblemLines(err, configFile)) findings.push({ level: 'fail', check: 'config', message: `${configFile}: ${p}` });
  }
  let base: string;
  try {
    base = daemonBase(url, configFile);
  } catch (err) {
    // A config that names no address (not JSON): the default one would be a guess, and "no
    // daemon" there is no finding. Its problem is the config check's already.
    if (!(err instanceof NoAddressInConfig)) throw err;
    findings.push({ level: 'warn', check: 'daemon', message: 'not checked: the config gives no address to find it at; pass --url to check a running daemon' });
    return findings;
  }
  // Port 0 means "any free port": there is no fixed address to find a daemon at (unless it has an
  // admin listener, or the daemon of this config recorded where it listens).
  const anyPort = !url && config?.listen.port === 0 && config.listen.admin === undefined && daemonElsewhere(base) === undefined;
  if (anyPort) findings.push({ level: 'ok', check: 'daemon', message: 'listen.port is 0 (any free port): pass --url to check a running daemon; checking the upstreams directly' });
  const daemon = anyPort ? undefined : await findDaemon(base, url ? undefined : config, findings);
  let servers: ServerView[] | undefined;
  let tools: ToolView[] | undefined;
  let waitedMs: number | undefined;
  if (typeof daemon === 'object') {
    servers = daemon.servers;
    const other = config && otherConfigFinding(config, configFile, daemon, base);
    if (other) findings.push(other);
    // ?all=1: held-back (quarantined, hidden) tools too; the caps count only what clients see.
    tools = (await getJson(base, '/admin/tools?all=1', toolsAnswer).catch(() => undefined))?.tools;
  } else if (daemon === undefined && config) {
    // No daemon of ours there ('locked': one that runs its own, which are not started twice).
    ({ servers, tools } = await lookLocally(config, { unreadPins: 'ignore', all: true }));
    waitedMs = LOCAL_START_MS;
  }
  if (servers) findings.push(...upstreamFindings(servers, waitedMs));
  if (tools) findings.push(...toolFindings(tools, waitedMs !== undefined), ...toolCaps(tools.filter((t) => t.visible !== false), config?.groups, (id) => config?.servers[id]?.prefix));
  if (config) findings.push(...heldItemFindings(config), ...loginFindings(config), ledgerFinding(config, typeof daemon === 'object' ? daemon.pid : daemon === 'locked' ? 'unknown' : undefined));
  return findings;
}

export const doctorCommand: CommandModule<object, DoctorArgs> = {
  command: 'doctor',
  describe: 'Check the config, the daemon, its port, the upstreams, tool names, quarantine, client tool caps, upstream logins and the ledger',
  builder: (y: Argv) =>
    daemonOptions(y, { config: 'Config file', json: 'Print the findings as JSON' }),
  handler: async (argv) => {
    const findings = await diagnose(argv.config, argv.url);
    if (argv.json) process.stdout.write(screenJson(JSON.stringify(findings, null, 2)) + '\n');
    else {
      const w = Math.max(...findings.map((f) => f.check.length));
      for (const f of findings) process.stdout.write(screenText(`${f.level.padEnd(4)}  ${f.check.padEnd(w)}  ${f.message}`) + '\n');
      const fails = findings.filter((f) => f.level === 'fail').length;
      const warns = findings.filter((f) => f.level === 'warn').length;
      process.stdout.write(fails || warns ? `\n${counted(fails, 'problem')}, ${counted(warns, 'warning')}\n` : '\nall good\n');
    }
    if (findings.some((f) => f.level === 'fail')) process.exitCode = 1;
  },
};
