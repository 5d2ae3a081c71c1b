import { screenJson, screenText } from '../ledger/format.js';
import { alignColumns } from '../text-columns.js';
import type { Argv, CommandModule } from 'yargs';
import { errorWithStderr, ownDownText, type ServerView } from '../downstream/admin-views.js';
import { restartAnswer, serversAnswer, toolsAnswer } from './admin-answers.js';
import { getJson, olderDaemon, postJson } from './admin-request.js';
import { daemonBase, daemonOptions, withDaemon, type DaemonArgs } from './daemon-client.js';
import { UsageError } from './usage-error.js';
import { monotonicNow } from '../monotonic.js';

type ServersArgs = DaemonArgs;

function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  return `${Math.round(s / 3600)}h`;
}

/**
 * Upstream text (serverInfo, an error, stderr) on one line: screenText leaves newlines and
 * tabs, with which a server could forge rows of the table or lines of an answer. Screened here,
 * before the columns are measured: screened after, each joiner or variation selector in a
 * cell became a '?' the padding had not counted, and the columns after it were shifted.
 */
const oneLine = (s: string): string => screenText(s).replace(/[\t\n]/g, '?');

/** Fixed-width columns; the last column is free text. */
export function columns(cells: string[][]): string {
  return alignColumns(cells.map((r) => r.map(oneLine)));
}

export function serversTable(servers: ServerView[], now = Date.now(), disabled: readonly string[] = []): string {
  const rows = [['ID', 'STATE', 'ERA', 'SERVER', 'TOOLS', 'IN FLIGHT', 'RESTARTS', 'SINCE', 'LAST ERROR']];
  for (const s of servers) {
    rows.push([
      s.id,
      // An open circuit is why calls are refused while the process looks fine.
      s.circuit !== undefined && s.circuit !== 'closed' ? `${s.state} (circuit ${s.circuit})` : s.state,
      s.era ?? '-',
      s.serverInfo ? `${s.serverInfo.name ?? '?'} ${s.serverInfo.version ?? ''}`.trim() : '-',
      s.tools === null ? '-' : String(s.tools),
      // In flight, and waiting for a slot; older daemons do not say.
      s.inFlight === undefined ? '-' : s.queued ? `${s.inFlight} +${s.queued} queued` : String(s.inFlight),
      String(s.restarts),
      age(now - s.since),
      // A principal's own process down (processPerPrincipal) is why its calls are refused while the server's is ready.
      [errorWithStderr(s), ownDownText(s)].filter((t) => t !== null).join('; '),
    ]);
  }
  // In the config but turned off: not running, and nowhere else to be seen.
  for (const id of disabled) rows.push([id, 'disabled', '-', '-', '-', '-', '-', '-', '']);
  return columns(rows);
}

interface RestartArgs extends ServersArgs {
  id: string;
  wait: boolean;
  timeout: number;
}

/** How a restarted server stands, once it is ready or failed (or the wait is over): a line and an exit code. */
export function restartOutcome(id: string, s: ServerView | undefined, waitedMs: number): { text: string; exitCode: number } {
  if (!s) return { text: `server "${id}" is no longer running (a reload removed it?)\n`, exitCode: 1 };
  if (s.state === 'ready') {
    const info = s.serverInfo ? `, ${oneLine(`${s.serverInfo.name ?? '?'} ${s.serverInfo.version ?? ''}`.trim())}` : '';
    return { text: `restarted "${id}": ready (${s.era ?? 'era unknown'}${info})\n`, exitCode: 0 };
  }
  const why = s.lastError ? `: ${oneLine(errorWithStderr(s) ?? '')}` : '';
  if (s.state === 'failed') return { text: `restarted "${id}", and it failed to start${why}\n`, exitCode: 1 };
  if (s.lastError) return { text: `restarted "${id}", but its first attempt failed${why} (the hub keeps trying; \`switchyard servers\` shows how it goes)\n`, exitCode: 1 };
  return { text: `restarted "${id}"; still ${s.state} after ${Math.round(waitedMs / 1000)} s\n`, exitCode: 1 };
}

/** Done waiting: ready, failed, or an attempt failed already (the fresh connection had no error before). */
const settled = (s: ServerView | undefined): boolean => !s || s.state === 'ready' || s.state === 'failed' || s.lastError !== null;

/**
 * Polls the restarted server every 200 ms until it settled or `timeoutMs` passed. Timed on the
 * monotonic clock: on the wall clock a step forward (NTP, a resume) ended the wait at the first
 * poll with "still starting after 3600 s", and a step back made --timeout wait that much longer.
 */
export async function untilSettled(poll: () => Promise<ServerView | undefined>, timeoutMs: number): Promise<{ s: ServerView | undefined; waitedMs: number }> {
  const t0 = monotonicNow();
  for (;;) {
    const s = await poll();
    const waitedMs = monotonicNow() - t0;
    if (settled(s) || waitedMs >= timeoutMs) return { s, waitedMs };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * --timeout as yargs hands it over: "abc" is NaN, which no wait ever reaches (it waited for
 * good), and "" or a negative ended the wait at once; a usage error (exit 2) instead, said in
 * one line as `start --port` says its own.
 */
function checkTimeout(value: unknown): void {
  if (typeof value === 'number' && Number.isFinite(value) && value > 0) return;
  const shown = typeof value === 'number' && !Number.isNaN(value) ? `not ${value}` : 'not a number';
  throw new UsageError(`--timeout must be a number of seconds above 0 (${shown}); --no-wait returns at once`);
}

const restartCommand: CommandModule<ServersArgs, RestartArgs> = {
  command: 'restart <id>',
  describe: 'Give one upstream a fresh connection (a failed one gets new attempts); calls in flight may finish first',
  builder: (y: Argv<ServersArgs>) =>
    y
      .positional('id', { type: 'string', demandOption: true, describe: 'The server id (as `switchyard servers` shows it)' })
      .option('wait', { type: 'boolean', default: true, describe: 'Wait until it is ready or failed (--no-wait: return at once)' })
      .option('timeout', { type: 'number', default: 30, describe: 'Seconds to wait' })
      .check((a) => {
        // "" would be asked of /admin/servers//restart, which no hub serves: not another program's fault.
        if (a.id === '') throw new UsageError('the server id is empty: give one as `switchyard servers` shows it');
        checkTimeout(a.timeout);
        return true;
      }) as unknown as Argv<RestartArgs>,
  handler: async (argv) => {
    const base = daemonBase(argv.url, argv.config);
    await withDaemon('servers restart', async () => {
      await postJson(base, `/admin/servers/${encodeURIComponent(argv.id)}/restart`, restartAnswer).catch(async (err: unknown) => {
        throw (await olderDaemon(err, base, 'switchyard servers restart', 'restart the daemon (SIGTERM, then start it again), which restarts every server')) ?? err;
      });
      if (!argv.wait) {
        // --json too: a script that asked for JSON parses what it gets (it got this line as text).
        process.stdout.write(argv.json ? screenJson(JSON.stringify({ restarting: argv.id }, null, 2)) + '\n' : `restarting "${argv.id}"\n`);
        return;
      }
      const { s, waitedMs } = await untilSettled(async () => (await getJson(base, '/admin/servers', serversAnswer)).servers.find((x) => x.id === argv.id), argv.timeout * 1000);
      const { text, exitCode } = restartOutcome(argv.id, s, waitedMs);
      if (argv.json) process.stdout.write(screenJson(JSON.stringify({ restarted: argv.id, server: s ?? null }, null, 2)) + '\n');
      // A failure is said as the command's, as its other errors are (withDaemon's `switchyard servers restart: …`).
      else if (exitCode === 0) process.stdout.write(screenText(text));
      else process.stderr.write(screenText(`switchyard servers restart: ${text}`));
      process.exitCode = exitCode;
    });
  },
};

export const serversCommand: CommandModule<object, ServersArgs> = {
  command: 'servers',
  describe: "The running daemon's upstreams: state, era, server version, tools, restarts, last error",
  builder: (y: Argv) =>
    daemonOptions(y).command(restartCommand),
  handler: async (argv) => {
    const base = daemonBase(argv.url, argv.config);
    await withDaemon('servers', async () => {
      const r = await getJson(base, '/admin/servers', serversAnswer);
      // The tools clients are shown (held-back ones not counted), not the raw list's length.
      const tools = await getJson(base, '/admin/tools', toolsAnswer).catch(() => undefined);
      if (tools) {
        const counts = new Map<string, number>();
        for (const t of tools.tools) counts.set(t.server, (counts.get(t.server) ?? 0) + 1);
        for (const s of r.servers) if (s.state === 'ready') s.tools = counts.get(s.id) ?? 0;
      }
      process.stdout.write(argv.json ? screenJson(JSON.stringify(r.servers, null, 2)) + '\n' : screenText(serversTable(r.servers, Date.now(), r.disabled)));
    });
  },
};
