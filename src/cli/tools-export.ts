import { screenJson } from '../ledger/format.js';
import type { Argv, CommandModule } from 'yargs';
import { toAnthropic, toOpenAi } from '../catalog/export.js';
import { ConfigError, configuredServer, loadConfig } from '../config/load.js';
import { configErrorText } from './config-problems.js';
import type { ToolView } from '../downstream/admin-views.js';
import { toolsAnswer } from './admin-answers.js';
import { getJson } from './admin-request.js';
import { daemonBase, DaemonError, daemonErrorLine, NoDaemonError, URL_DESCRIBE } from './daemon-client.js';
import { notEmpty } from './given-once.js';
import { lookLocally, PinsUnreadError } from './local-catalog.js';
import { takeStdout } from '../log.js';
import { counted } from '../counted.js';

export interface ToolsExportArgs {
  format: 'openai' | 'anthropic';
  config: string;
  url?: string;
  server?: string;
  /** Only what this tool group (`/mcp/<group>`) shows: asked of the daemon, which knows the groups. */
  group?: string;
  local: boolean;
}

/**
 * What stderr says beside an export: the tools it could not give as they are, counted. Each a
 * note of the command's (`switchyard tools export: note: …`), as every command's notes are: in
 * an IDE's or a script's log a bare line does not say whose it is.
 */
export function exportNotes(doc: ReturnType<typeof toOpenAi> | ReturnType<typeof toAnthropic>, command: string): string {
  const notes: string[] = [];
  if (doc.format === 'openai' && doc.notStrict.length) notes.push(`${counted(doc.notStrict.length, 'tool')} could not be made strict; see "notStrict"`);
  if (doc.format === 'openai' && Object.keys(doc.loosened).length)
    notes.push(`${counted(Object.keys(doc.loosened).length, 'strict tool')} lost constraints the API does not take (the hub still checks them); see "loosened"`);
  if (doc.skipped.length) notes.push(`${counted(doc.skipped.length, 'tool')} left out: the API refuses their names; see "skipped"`);
  return notes.map((n) => `switchyard ${command}: note: ${n}\n`).join('');
}

/**
 * Adds the export options to `tools`' builder: `tools --format` and its subcommand `tools
 * export` (whose own builder makes --format required there) both read them.
 */
export function exportOptions<T>(y: Argv<T>): Argv<T & ToolsExportArgs> {
  return y
    .option('format', {
      choices: ['openai', 'anthropic'] as const,
      describe: 'Print the catalog as function-calling definitions (OpenAI strict mode, or Anthropic tools)',
    })
    .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' })
    .option('url', { type: 'string', describe: URL_DESCRIBE })
    .option('server', { type: 'string', describe: 'Only this server' })
    .option('group', { type: 'string', describe: 'Only what this tool group (/mcp/<group>) shows' })
    .option('local', {
      type: 'boolean',
      default: false,
      // `tools` lists only what the daemon holds (pins, quarantine): there --local is for --format.
      describe: 'With --format: connect to the upstreams directly instead of asking the daemon (names may differ from the daemon after collisions)',
    })
    .check(
      notEmpty([
        ['server', 'give a server id, or leave the option out (an unset variable in a script?)'],
        ['group', 'give a tool group, or leave the option out (an unset variable in a script?)'],
      ]),
    ) as unknown as Argv<T & ToolsExportArgs>;
}

/** --local --server naming no server of the config: said as the command's, as the daemon's refusal of it is (exit 1 alike). */
class NoSuchServer extends Error {}

/**
 * The catalog from the running daemon (the names its clients see), or, with --local or when
 * no daemon runs, from the upstreams of the config directly.
 */
async function catalog(a: ToolsExportArgs, command: string): Promise<ToolView[]> {
  if (!a.local) {
    try {
      const q = new URLSearchParams();
      if (a.server) q.set('server', a.server);
      if (a.group) q.set('group', a.group);
      // Held-back tools too, to say how many the export leaves out (runToolsExport).
      q.set('all', '1');
      const qs = `?${q}`;
      return (await getJson(daemonBase(a.url, a.config), `/admin/tools${qs}`, toolsAnswer)).tools;
    } catch (err) {
      // A group's view is the daemon's: never widened to the whole catalog of the upstreams.
      if (!(err instanceof NoDaemonError) || a.url || a.group) throw err;
      // A note, as the command's (as `ledger` says its own): the export goes on.
      process.stderr.write(`switchyard ${command}: note: ${err.message}; connecting to the upstreams of ${a.config} directly\n`);
    }
  }
  const config = loadConfig(a.config);
  if (a.server && configuredServer(config, a.server) === undefined)
    throw new NoSuchServer(`no server named "${a.server}" in ${a.config} (servers: ${Object.keys(config.servers).join(', ') || 'none'})`);
  return (await lookLocally(config, { server: a.server, all: true })).tools;
}

export async function runToolsExport(a: ToolsExportArgs, command = 'tools export'): Promise<void> {
  // A group is the daemon's to apply, and --local asks no daemon: the two cannot both be meant.
  if (a.local && a.group) {
    process.stderr.write(`switchyard ${command}: --group needs the running daemon (it applies the groups); drop --local\n`);
    process.exitCode = 2;
    return;
  }
  // Nor a daemon's address: --local would ignore it, and export another catalog than the one named.
  if (a.local && a.url !== undefined) {
    process.stderr.write(`switchyard ${command}: --url names a daemon to ask, and --local asks none; drop one of them\n`);
    process.exitCode = 2;
    return;
  }
  // The export is stdout, piped into a file a model API is given: what the plugins (loaded for a
  // local look) or anything else in this process prints goes to stderr instead.
  const out = takeStdout();
  try {
    const listed = await catalog(a, command);
    // What clients are shown: a tool held back (quarantined for review, hidden) is no model's.
    const tools = listed.filter((t) => t.visible !== false);
    const doc = a.format === 'openai' ? toOpenAi(tools) : toAnthropic(tools);
    out.write(screenJson(JSON.stringify(doc, null, 2)) + '\n');
    process.stderr.write(exportNotes(doc, command));
    // Left out unsaid, a quarantined tool made an export a model lacked a tool in, and no one knew why.
    const held = listed.length - tools.length;
    if (held > 0) process.stderr.write(`switchyard ${command}: note: ${counted(held, 'tool')} held back (quarantined or hidden) and not exported; \`switchyard tools\` (with no daemon, \`switchyard doctor\`) says why\n`);
  } catch (err) {
    // A config error is 2 (as start, validate and reload), the daemon's is 1, no daemon 3 (README, exit codes).
    if (err instanceof ConfigError) {
      process.stderr.write(configErrorText(err, a.config, command));
      process.exitCode = 2;
      return;
    }
    if (!(err instanceof NoDaemonError || err instanceof DaemonError || err instanceof PinsUnreadError || err instanceof NoSuchServer)) throw err;
    process.stderr.write(daemonErrorLine(err, command));
    // As `tools` and `servers`: 3 says "no daemon" apart from a daemon that answered with an error.
    process.exitCode = err instanceof NoDaemonError ? 3 : 1;
  }
}

export const toolsExportCommand: CommandModule<object, ToolsExportArgs> = {
  command: 'export',
  describe: 'The catalog as function-calling definitions: --format openai | anthropic',
  // `tools` declared the options already (its builder runs first): only --format is required here.
  // Its --json and --kind reach export too, where an export is JSON of tools: the help leaves them out.
  builder: (y: Argv) => y.demandOption('format').hide('json').hide('kind') as Argv<ToolsExportArgs>,
  handler: (a) => runToolsExport(a),
};
