import { existsSync } from 'node:fs';
import type { Argv, CommandModule } from 'yargs';
import { LIST_KINDS, type ListKind } from '../catalog/lists.js';
import type { PinRecord } from '../catalog/pins.js';
import type { ItemView, ToolView } from '../downstream/admin-views.js';
import { openLedgerDb } from '../ledger/db.js';
import { approvePins, matchPins } from '../ledger/pins.js';
import { screenJson, screenText, table } from '../ledger/format.js';
import { itemsAnswer, pinsChangedAnswer, toolsAnswer } from './admin-answers.js';
import { getJson, postJson } from './admin-request.js';
import { daemonBase, withDaemon } from './daemon-client.js';
import { resolveLedgerPath, sqliteSaysOf } from './ledger/ledger-file.js';
import { UsageError } from './usage-error.js';
import { ledgerWriterText } from './ledger-lock.js';
import { diffLines, formatDiff } from './line-diff.js';
import { exportOptions, runToolsExport, toolsExportCommand, type ToolsExportArgs } from './tools-export.js';

/**
 * `switchyard tools`: what the running daemon exposes and holds back (it asks the daemon's
 * loopback admin route /admin/tools, because pins, flags and hub names live there);
 * `tools diff NAME` and `tools approve NAME | --server ID` work on the ledger database directly,
 * so they also work with the daemon stopped; `approve` then tells a running daemon to look
 * (POST /admin/pins/changed), which takes the approval at once and tells its clients the list
 * changed (one it cannot reach finds it at its next poll, within PIN_POLL_MS).
 */

interface ListArgs extends Partial<ToolsExportArgs> {
  config: string;
  url?: string;
  server?: string;
  group?: string;
  json: boolean;
  /** Prompts, resources or resource templates instead of tools. */
  kind?: KindWord;
}

interface DbArgs {
  config: string;
  db?: string;
  name?: string;
  server?: string;
  /** Only pins of this kind (default: every kind). */
  kind?: KindWord;
  /** approve: only if the pending definition is this one (the pin `diff` showed, or its start). */
  pin?: string;
}

/** `--kind` as the operator says it, and the pins it means. */
const KIND_WORDS = { tool: 'tools', prompt: 'prompts', resource: 'resources', template: 'resourceTemplates' } as const satisfies Record<string, ListKind>;
type KindWord = keyof typeof KIND_WORDS;
const WORD_OF: Record<ListKind, KindWord> = { tools: 'tool', prompts: 'prompt', resources: 'resource', resourceTemplates: 'template' };

// Upstream text (names, reasons, definitions) never reaches the terminal raw.
const out = (t: string) => void process.stdout.write(screenText(t));
const err = (t: string) => void process.stderr.write(t);
/** A line of the command's own (`switchyard tools approve: …`), as its daemon's errors and every other command's are said. */
const fail = (command: string, t: string) => err(`switchyard ${command}: ${t}`);

const HINTS: [string, string][] = [
  ['readOnlyHint', 'R'],
  ['destructiveHint', 'D'],
  ['idempotentHint', 'I'],
  ['openWorldHint', 'O'],
];

/** "R-IO": a letter per hint that is true, "-" when false, "?" when not said. */
export function hintLetters(a: unknown): string {
  if (a === null || typeof a !== 'object') return '????';
  const o = a as Record<string, unknown>;
  return HINTS.map(([k, l]) => (o[k] === true ? l : o[k] === false ? '-' : '?')).join('');
}

function stateOf(t: Pick<ToolView, 'visible' | 'flags' | 'pin'>): string {
  if (t.visible === false) return t.flags.includes('quarantined') ? `quarantined (${t.pin?.state ?? '?'})` : 'hidden';
  return t.pin && t.pin.state !== 'approved' ? `shown, ${t.pin.state} (pinning: warn)` : 'shown';
}

export function toolsTable(tools: ToolView[]): string {
  const rows = tools.map((t) => [
    t.name,
    t.server,
    t.upstreamName,
    t.era ?? '-',
    t.trust,
    stateOf(t),
    `${hintLetters(t.annotations)} ${t.annotationSource === 'config' ? 'cfg' : t.annotationSource === 'server' ? 'srv' : 'cons'}`,
    t.claimedAnnotations === undefined ? '(none)' : hintLetters(t.claimedAnnotations),
    t.flags.filter((f) => !f.startsWith('pin:') && f !== 'quarantined' && f !== 'hidden').join(',') || '-',
  ]);
  return (
    table(['tool', 'server', 'upstream', 'era', 'trust', 'state', 'hub hints', 'claimed', 'flags'], rows) +
    '\nhints: R readOnly, D destructive, I idempotent, O openWorld ("-" false, "?" unsaid); hub hints come from the trusted server (srv), the config (cfg) or the conservative defaults (cons)\n'
  );
}

/** `tools --kind prompt|resource|template`: those items, their pins and flags, as tools are listed. */
export function itemsTable(word: KindWord, items: ItemView[]): string {
  const rows = items.map((t) => [t.name, t.server, t.upstreamName, t.era ?? '-', t.trust, stateOf(t), t.flags.filter((f) => !f.startsWith('pin:') && f !== 'quarantined' && f !== 'hidden').join(',') || '-']);
  return table([word, 'server', 'upstream', 'era', 'trust', 'state', 'flags'], rows);
}

/** Each held-back item's reason and each flag's details, after the table (tools and other kinds alike). */
function flagLines(items: ItemView[]): void {
  for (const t of items) {
    if (t.hidden) out(`\n${t.name}: ${t.hidden}`);
    for (const d of t.details ?? []) if (d.category !== 'pinning') out(`\n${t.name}: ${d.category ?? 'flag'} ${d.code}${d.field ? ` in ${d.field}` : ''}: ${d.message}`);
  }
  if (items.some((t) => t.hidden || t.details?.length)) out('\n');
}

/** `--kind` other than tool with an export (`--format`, `tools export`): refused (exit 2), as export is of tools; whether it was. */
function kindNotForExport(kind: KindWord | undefined, command: string): boolean {
  if (kind === undefined || kind === 'tool') return false;
  fail(command, `--kind ${kind}: --format exports tools only\n`);
  process.exitCode = 2;
  return true;
}

async function list(a: ListArgs): Promise<void> {
  const kind = a.kind === undefined || a.kind === 'tool' ? undefined : a.kind;
  if (a.format && kindNotForExport(kind, 'tools')) return;
  if (a.format) return runToolsExport(a as ToolsExportArgs, 'tools');
  if (a.local) {
    // Pins, quarantines and flags live in the running hub; a local look would show none of them.
    fail('tools', 'listing asks the running daemon (start one with `switchyard start`); --local works with --format\n');
    process.exitCode = 2;
    return;
  }
  const q = new URLSearchParams({ all: '1' });
  if (a.server) q.set('server', a.server);
  if (a.group) q.set('group', a.group);
  // As `servers`: no daemon is exit 3, one that answered with an error 1 (withDaemon).
  await withDaemon('tools', async () => {
    const base = daemonBase(a.url, a.config);
    if (kind) {
      q.set('kind', KIND_WORDS[kind]);
      const answer = await getJson(base, `/admin/tools?${q}`, itemsAnswer(KIND_WORDS[kind]));
      if (!('items' in answer)) {
        fail('tools', `the daemon at ${base} is older than \`tools --kind\`: it lists tools only (\`tools diff NAME --kind ${kind}\` shows a pending change from the ledger)\n`);
        process.exitCode = 1;
        return;
      }
      if (a.json) return void process.stdout.write(screenJson(JSON.stringify(answer.items, null, 2)) + '\n');
      if (answer.items.length === 0) return out(`no ${kind}s\n`);
      out(itemsTable(kind, answer.items));
      return flagLines(answer.items);
    }
    const { tools } = await getJson(base, `/admin/tools?${q}`, toolsAnswer);
    if (a.json) return void process.stdout.write(screenJson(JSON.stringify(tools, null, 2)) + '\n');
    if (tools.length === 0) return out('no tools\n');
    out(toolsTable(tools));
    flagLines(tools);
  });
}

function openDb(a: DbArgs) {
  // `tools`' --config has its default even where not given (daemonOptions): with no config file of
  // that name, the ledger is ./data/ledger.db, as for `ledger`, not "config file not found".
  const config = a.config === 'hub.config.json' && !existsSync(a.config) ? undefined : a.config;
  const path = resolveLedgerPath({ config, db: a.db });
  if (!existsSync(path)) throw new Error(`no ledger database at ${path}: the hub has not pinned any tool yet`);
  // The hub writing it (an approval is picked up by it) may be of an older Switchyard: its ledger is not upgraded under it.
  try {
    return openLedgerDb({ path, heldBy: ledgerWriterText(path) });
  } catch (e) {
    throw sqliteSaysOf(path, e);
  }
}

function pretty(json: string | null): string[] {
  if (json === null) return ['(nothing approved under this name)'];
  try {
    return JSON.stringify(JSON.parse(json), null, 2).split('\n');
  } catch {
    return [json];
  }
}

/** A tool's "server/tool", as it always was; another kind's with its kind first ("prompt rug/greet"). */
function label(r: PinRecord): string {
  return `${r.kind === undefined ? '' : `${WORD_OF[r.kind]} `}${r.server}/${r.tool}`;
}

function kindsOf(a: DbArgs): readonly ListKind[] {
  return a.kind === undefined ? LIST_KINDS : [KIND_WORDS[a.kind]];
}

function pick(a: DbArgs, recs: PinRecord[], what: 'compare' | 'approve'): PinRecord[] | undefined {
  const command = what === 'compare' ? 'tools diff' : 'tools approve';
  if (recs.length === 0) {
    fail(command, `no pinned ${a.kind ?? 'tool, prompt or resource'} matches${a.name === undefined ? '' : ` ${a.name}`}${a.server ? ` on server ${a.server}` : ''}\n`);
    process.exitCode = 1;
    return undefined;
  }
  const servers = new Set(recs.map((r) => r.server));
  if (a.name !== undefined && servers.size > 1) {
    fail(command, `${a.name} names ${a.kind ?? 'item'}s of several servers (${[...servers].join(', ')}); add --server to ${what} one\n`);
    process.exitCode = 2;
    return undefined;
  }
  const kinds = new Set(recs.map((r) => WORD_OF[r.kind ?? 'tools']));
  if (a.name !== undefined && kinds.size > 1) {
    fail(command, `${a.name} names a ${[...kinds].join(' and a ')} of ${[...servers][0]}; add --kind to ${what} one\n`);
    process.exitCode = 2;
    return undefined;
  }
  return recs;
}

function diff(a: DbArgs): void {
  const db = openDb(a);
  try {
    const recs = pick(a, matchPins(db, a.name, a.server, kindsOf(a)), 'compare');
    if (!recs) return;
    for (const r of recs) {
      if (r.pendingHash === null) {
        out(`${label(r)}: no pending change (approved ${r.approvedBy ?? ''}${r.approvedMs ? ` at ${new Date(r.approvedMs).toISOString()}` : ''})\n`);
        continue;
      }
      const why = r.pendingReason === 'renamed' ? `the approved definition of "${r.renamedFrom}" under a new name` : 'changed since it was approved';
      out(`${label(r)}: ${why}, seen ${r.pendingSinceMs ? new Date(r.pendingSinceMs).toISOString() : '?'}\n`);
      const before = r.pendingReason === 'renamed' && r.hash === null ? (matchPins(db, `${r.server}/${r.renamedFrom}`, r.server, [r.kind ?? 'tools'])[0]?.definition ?? null) : r.definition;
      out(`--- approved${r.pendingReason === 'renamed' ? ` (${r.renamedFrom})` : ''} ${r.hash?.slice(0, 12) ?? ''}\n+++ pending ${r.pendingHash.slice(0, 12)}\n`);
      out(formatDiff(diffLines(pretty(before), pretty(r.pendingDefinition))));
    }
  } finally {
    db.close();
  }
}

/** How long `approve` waits for a running daemon to take its approval (it answers at once; this bounds a stuck peer). */
const TELL_DAEMON_MS = 2000;

/**
 * Tells the daemon of the config (its admin address, as `reload` finds it) to read the changed
 * pins now. Best effort: no daemon, another build, a refused key or no answer leave the approval
 * to the daemon's poll (PIN_POLL_MS). A daemon on another ledger only finds nothing changed.
 */
async function tellDaemon(a: DbArgs): Promise<void> {
  // No config file (a ledger named with --db): no address of its daemon to tell, and a guessed
  // one (the default port) is no place to send the admin key to.
  if (!existsSync(a.config)) return;
  try {
    await postJson(daemonBase(undefined, a.config), '/admin/pins/changed', pinsChangedAnswer, { timeoutMs: TELL_DAEMON_MS });
  } catch {
    // the poll takes it
  }
}

async function approve(a: DbArgs): Promise<void> {
  if (approveInLedger(a) > 0) await tellDaemon(a);
}

/** The approval, in the ledger file; how many pins it approved. */
function approveInLedger(a: DbArgs): number {
  if (a.name === undefined && a.server === undefined) {
    fail('tools approve', 'give a name (of a tool, prompt or resource template), or --server ID to approve every pending change of a server\n');
    process.exitCode = 2;
    return 0;
  }
  const db = openDb(a);
  try {
    const recs = pick(a, matchPins(db, a.name, a.server, kindsOf(a)), 'approve');
    if (!recs) return 0;
    const pending = recs.filter((r) => r.pendingHash !== null);
    if (pending.length === 0) {
      out(`nothing to approve: ${recs.map(label).join(', ')} ${recs.length === 1 ? 'has' : 'have'} no pending change\n`);
      return 0;
    }
    // What is pending may have changed since the operator looked (another user's version of the
    // tool, or the upstream again): --pin approves only the definition that was reviewed.
    const pin = a.pin?.toLowerCase();
    const other = pin === undefined ? [] : pending.filter((r) => !r.pendingHash!.startsWith(pin));
    if (pin !== undefined && (pin.length < 6 || other.length > 0)) {
      fail(
        'tools approve',
        pin.length < 6
          ? '--pin needs at least 6 characters of the pending pin that `tools diff` shows\n'
          : `not approved: the pending change of ${other.map(label).join(', ')} is now pin ${other.map((r) => r.pendingHash!.slice(0, 12)).join(', ')}, not ${pin}; run diff again\n`,
      );
      process.exitCode = 1;
      return 0;
    }
    const done = approvePins(db, pending, Date.now());
    for (const r of done) out(`approved ${label(r)} (${r.pendingReason}${r.renamedFrom ? ` from ${r.renamedFrom}` : ''}): pin ${r.pendingHash!.slice(0, 12)}\n`);
    if (done.length < pending.length) out(`${pending.length - done.length} changed again meanwhile; run diff again\n`);
    return done.length;
  } finally {
    db.close();
  }
}

function dbOptions<T>(y: Argv<T>): Argv<T & DbArgs> {
  // tools' own options reach diff and approve, which refuse them (guarded): their help leaves them out.
  for (const o of NOT_FOR_DB) y = y.hide(o);
  return y
    // -c is `tools`' own alias already (its builder runs first): given again, help shows it twice.
    .option('config', { type: 'string', default: 'hub.config.json', describe: 'Config file (for ledger.path)' })
    .option('db', { type: 'string', describe: 'Ledger database (default: ledger.path of the config)' })
    .option('server', { type: 'string', describe: 'Only pins of this server' })
    // Its choices are `tools`' own --kind's (declared again, yargs would list each twice).
    .option('kind', { describe: 'Only pins of this kind (default: every kind; resource: pins of listed resources an older Switchyard kept, as they are pinned no more)' }) as unknown as Argv<T & DbArgs>;
}

/** `tools`' own options reach its subcommands too; diff and approve read the ledger file, not a daemon or a view of it. */
const NOT_FOR_DB = ['format', 'group', 'url', 'local', 'json'] as const;

function guarded(command: string, fn: (a: DbArgs) => void | Promise<void>): (a: DbArgs) => Promise<void> {
  return async (a) => {
    const given = NOT_FOR_DB.filter((o) => (a as unknown as Record<string, unknown>)[o] !== undefined && (a as unknown as Record<string, unknown>)[o] !== false);
    if (given.length > 0) {
      fail(command, `${given.map((o) => `--${o}`).join(', ')}: not for diff or approve, which read the ledger database of the config (--config, --db)\n`);
      process.exitCode = 2;
      return;
    }
    // As an empty --server is said (`tools --server ''`): a script's unset variable, not a name.
    if (a.name === '') {
      fail(command, 'the name is empty: give a hub name, server/name, upstream name or uriTemplate (an unset variable in a script?)\n');
      process.exitCode = 2;
      return;
    }
    try {
      await fn(a);
    } catch (e) {
      fail(command, `${(e as Error).message}\n`);
      // A config file that is not there (or names no usable ledger.path) is 2, as for `ledger`.
      process.exitCode = e instanceof UsageError ? 2 : 1;
    }
  };
}

const diffCommand: CommandModule<object, DbArgs> = {
  command: 'diff <name>',
  describe: 'Show how a quarantined tool, prompt or resource template changed since it was approved (name: hub name, server/name, upstream name or uriTemplate)',
  builder: (y: Argv) => dbOptions(y).positional('name', { type: 'string' }) as unknown as Argv<DbArgs>,
  handler: guarded('tools diff', diff),
};

const approveCommand: CommandModule<object, DbArgs> = {
  command: 'approve [name]',
  describe: 'Accept the pending change of a tool, prompt or resource template, or with --server every pending change of that server',
  builder: (y: Argv) =>
    dbOptions(y)
      .positional('name', { type: 'string' })
      .option('pin', { type: 'string', describe: 'Approve only if the pending definition is still this pin (as `tools diff` shows it)' }) as unknown as Argv<DbArgs>,
  handler: guarded('tools approve', approve),
};

export const toolsCommand: CommandModule<object, ListArgs> = {
  command: 'tools',
  describe: 'The tools the running hub exposes and holds back (--kind prompt|resource|template: those instead): names, servers, eras, trust, hints, pins, flags',
  builder: (y: Argv) =>
    exportOptions(y)
      .option('json', { type: 'boolean', default: false, describe: 'JSON, with the annotations as claimed by each server' })
      .option('kind', { choices: Object.keys(KIND_WORDS), describe: 'List the prompts, resources or resource templates instead (their pins and flags), not the tools' })
      .command(diffCommand)
      .command(approveCommand)
      // `tools`' --kind reaches export too, which would export the tools all the same.
      .command({ ...toolsExportCommand, handler: (a: ToolsExportArgs & { kind?: KindWord }) => (kindNotForExport(a.kind, 'tools export') ? undefined : runToolsExport(a)) }) as unknown as Argv<ListArgs>,
  handler: (a) => list(a),
};
