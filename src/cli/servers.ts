import { screenJson, screenText } from '../ledger/format.js';
import type { Argv, CommandModule } from 'yargs';
import type { ServerView, ToolView } from '../downstream/admin-views.js';
import { daemonBase, DaemonError, getJson, NoDaemonError } from './daemon-client.js';

interface ServersArgs {
  config: string;
  url?: string;
  json: boolean;
}

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}

/** Fixed-width columns; the last column is free text. */
export function columns(rows: string[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => (i === r.length - 1 ? 0 : r[i].length))));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd()).join('\n') + '\n';
}

export function serversTable(servers: ServerView[], now = Date.now()): string {
  const rows = [['ID', 'STATE', 'ERA', 'SERVER', 'TOOLS', 'RESTARTS', 'SINCE', 'LAST ERROR']];
  for (const s of servers) {
    rows.push([
      s.id,
      s.state,
      s.era ?? '-',
      s.serverInfo ? `${s.serverInfo.name ?? '?'} ${s.serverInfo.version ?? ''}`.trim() : '-',
      s.tools === null ? '-' : String(s.tools),
      String(s.restarts),
      age(now - s.since),
      s.lastError ?? '',
    ]);
  }
  return columns(rows);
}

export const serversCommand: CommandModule<object, ServersArgs> = {
  command: 'servers',
  describe: "The running daemon's upstreams: state, era, server version, tools, restarts, last error",
  builder: (y: Argv) =>
    y
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file (for the daemon address)' })
      .option('url', { type: 'string', describe: 'The daemon address, e.g. http://127.0.0.1:7410' })
      .option('json', { type: 'boolean', default: false, describe: 'Print JSON' }) as Argv<ServersArgs>,
  handler: async (argv) => {
    const base = daemonBase(argv.url, argv.config);
    try {
      const r = await getJson<{ servers: ServerView[] }>(base, '/admin/servers');
      // Tool counts come from the catalog (listing fills it if no client has yet).
      const tools = await getJson<{ tools: ToolView[] }>(base, '/admin/tools').catch(() => undefined);
      if (tools) {
        const counts = new Map<string, number>();
        for (const t of tools.tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
        for (const s of r.servers) if (s.state === 'ready') s.tools = counts.get(s.id) ?? 0;
      }
      process.stdout.write(argv.json ? screenJson(JSON.stringify(r.servers, null, 2)) + '\n' : screenText(serversTable(r.servers)));
    } catch (err) {
      if (!(err instanceof NoDaemonError || err instanceof DaemonError)) throw err;
      process.stderr.write(`${err.message}\n`);
      process.exitCode = err instanceof NoDaemonError ? 3 : 1;
    }
  },
};
