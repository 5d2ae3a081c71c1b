import type { Argv, CommandModule } from 'yargs';
import type { ReloadOutcome } from '../config/watch.js';
import type { ReloadReport } from '../hub/reload.js';
import { screenJson, screenText } from '../ledger/format.js';
import { reloadAnswer } from './admin-answers.js';
import { olderDaemon, postJson } from './admin-request.js';
import { daemonBase, daemonOptions, withDaemon, type DaemonArgs } from './daemon-client.js';

type Outcome = ReloadOutcome<ReloadReport>;

/** A reload can wait on plugins loading (10 s each at most) and servers being built. */
const RELOAD_TIMEOUT_MS = 120_000;

/**
 * What the daemon did, for a person: one line per kind of change, or that there was none (its
 * output, stdout), and what failed (`problem`, stderr, said as the command's by the handler). A
 * reload that found nothing new says when the file was applied and what that changed (the
 * daemon's file watch applies a save before `switchyard reload` asks); plugins the hub runs
 * without, from this load or an earlier one, fail the command, the changes applied all the same.
 */
export function describeOutcome(o: Outcome): { text: string; problem?: string; exitCode: number } {
  if (o.status === 'rejected')
    return { text: '', problem: `config reload rejected; the running config is kept:\n${o.problems.map((p) => `  ${p}\n`).join('')}`, exitCode: 2 };
  if (o.status === 'failed') return { text: '', problem: `config reload failed; the running config is kept: ${o.error}\n`, exitCode: 1 };
  if (o.status === 'unchanged') return { text: 'reloaded: nothing changed\n', exitCode: 0 };
  const r = o.report;
  const lines: string[] = [];
  const list = (label: string, items: readonly string[]) => {
    if (items.length) lines.push(`  ${label}: ${items.join(', ')}`);
  };
  const changes = (c: ReloadReport) => {
    list('servers added', c.added);
    list('servers removed', c.removed);
    list('servers restarted', c.restarted);
    list('servers updated (connection kept)', c.updated);
    // Absent from an older daemon's report.
    list('servers disabled in the config (not started)', c.disabled ?? []);
    list('applied', c.applied);
  };
  changes(r);
  let head = 'reloaded:';
  if (lines.length === 0 && r.earlier) {
    head = `reloaded: nothing new since ${r.earlier.at}, when the daemon applied this file (its file watch, SIGHUP or an earlier reload):`;
    changes(r.earlier.report);
  }
  list('changed, but only a restart applies them (the running values are kept)', r.restartOnly);
  const text = lines.length ? `${head}\n${lines.join('\n')}\n` : 'reloaded: nothing changed\n';
  // A plugin the operator asked for is not running (this reload could not load it, or an
  // earlier load could not and nothing loaded it since): say so, and fail the command.
  const failed = r.pluginsNotLoaded ?? r.pluginsFailed ?? [];
  if (failed.length) return { text, problem: `plugins that could not be loaded (the hub runs without them, but where a line says the version loaded before runs on):\n${failed.map((f) => `  ${f}\n`).join('')}`, exitCode: 1 };
  return { text, exitCode: 0 };
}

export const reloadCommand: CommandModule<object, DaemonArgs> = {
  command: 'reload',
  describe: 'Make the running daemon read its config file again and apply it (as SIGHUP does), and say what changed',
  builder: (y: Argv) => daemonOptions(y, { config: 'Config file (for the daemon address; the daemon reads its own)' }),
  handler: async (argv) => {
    const base = daemonBase(argv.url, argv.config);
    await withDaemon('reload', async () => {
      const o = await postJson(base, '/admin/reload', reloadAnswer, { timeoutMs: RELOAD_TIMEOUT_MS, answers: [422, 500] }).catch(async (err: unknown) => {
        throw (await olderDaemon(err, base, 'switchyard reload', 'send it SIGHUP, which reloads its config file')) ?? err;
      });
      const { text, problem, exitCode } = describeOutcome(o);
      if (argv.json) process.stdout.write(screenJson(JSON.stringify(o, null, 2)) + '\n');
      else {
        process.stdout.write(screenText(text));
        // Said as the command's, as its other errors are (withDaemon's `switchyard reload: …`).
        if (problem) process.stderr.write(screenText(`switchyard reload: ${problem}`));
      }
      process.exitCode = exitCode;
    });
  },
};
