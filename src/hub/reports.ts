/**
 * What the catalog, the plugins and the instruction screen report as they go (a pin changed, a
 * tool dropped, a description or instructions poisoned, a plugin failed): a log line, and a
 * ledger row for what is held back or taken, so `ledger query` shows it beside the calls.
 * Nothing here answers a request; a row the ledger cannot write is let go (its own log says why).
 */
import type { Logger } from '../log.js';
import type { PolicyConfig } from '../config/types.js';
import { ITEM_NOUN, type CatalogEvent, type DropEvent, type PoisonEvent } from '../catalog/part.js';
import type { InstructionsEvent } from '../catalog/instructions.js';
import type { PluginFailure } from '../plugins/runner.js';
import type { AuditSink } from '../ledger/sink.js';
import type { AuditBegin } from '../ledger/types.js';

/** Where a report goes. */
export interface ReportSinks {
  readonly ledger: Pick<AuditSink, 'record'>;
  readonly log: Logger;
}

/** policy.pinning: a changed definition held back until approved ('block', the default) or passed with a warning. */
type PinningMode = NonNullable<PolicyConfig['pinning']>;

/** Pin changes and poisoned descriptions: a log line, and an audit row when an item is held back or its change taken. */
export function reportCatalogEvent(to: ReportSinks, e: CatalogEvent, pinning: PinningMode | undefined): void {
  const base = { ts: Date.now(), requestId: 'catalog', principal: 'hub', clientEra: '-', server: e.server, upstreamName: e.tool };
  if (e.kind === 'dropped' || e.kind === 'poisoning') return reportCatalogCheck(to, e, base);
  // Tools keep the words they always had; the other kinds name themselves.
  const noun = e.itemKind === undefined ? 'tool' : ITEM_NOUN[e.itemKind];
  const who = { server: e.server, [e.itemKind === undefined ? 'tool' : e.itemKind === 'prompts' ? 'prompt' : 'item']: e.tool };
  const kindSaid = e.itemKind === undefined ? '' : `${noun} `;
  if (e.kind === 'first-seen') return void to.log.debug({ ...who, hash: e.hash.slice(0, 12) }, `${noun} pinned on first sight`);
  if (e.kind === 'reverted') return void to.log.info(who, `${noun} definition is back to the approved one`);
  if (e.kind === 'approved') {
    to.log.info({ ...who, hash: e.hash.slice(0, 12) }, `${noun} change approved by an operator`);
    return void to.ledger.record({ ...base, method: 'catalog/approve' }, { outcome: 'ok', errorMessage: `approved by the CLI; ${kindSaid}pin ${e.hash.slice(0, 12)}`, latencyMs: 0 }).catch(() => undefined);
  }
  const record = (method: string, outcome: 'ok' | 'denied', message: string) =>
    void to.ledger.record({ ...base, method }, { outcome, errorKind: outcome === 'denied' ? 'policy' : null, errorMessage: message, latencyMs: 0 }).catch(() => undefined);
  const what = e.reason === 'renamed' ? `the approved definition of "${e.renamedFrom}" under a new name` : 'definition changed since it was approved';
  const pins = `pin ${e.previousHash ? e.previousHash.slice(0, 12) : '(none)'} -> ${e.hash.slice(0, 12)}`;
  if (e.kind === 'auto-approved') {
    to.log.info({ ...who, reason: e.reason }, `${noun} change approved automatically (trusted server)`);
    return record('catalog/auto-approve', 'ok', `${kindSaid}${what}; ${pins}`);
  }
  const block = (pinning ?? 'block') === 'block';
  to.log.warn({ ...who, reason: e.reason, renamedFrom: e.renamedFrom, blocked: block }, block ? `${noun} quarantined: hidden until approved (switchyard tools approve)` : `${noun} definition changed: passed with a warning`);
  record('catalog/quarantine', block ? 'denied' : 'ok', `${kindSaid}${what}; ${pins}${block ? '' : ' (pinning: warn)'}`);
}

/** A dropped tool or a poisoned description: a log line, and an audit row when it is held back. */
function reportCatalogCheck(to: ReportSinks, e: DropEvent | PoisonEvent, base: Omit<AuditBegin, 'method'>): void {
  const record = (method: string, outcome: 'ok' | 'denied', message: string) =>
    void to.ledger.record({ ...base, method }, { outcome, errorKind: outcome === 'denied' ? 'policy' : null, errorMessage: message, latencyMs: 0 }).catch(() => undefined);
  if (e.kind === 'dropped') {
    if (e.rule === 'schema') to.log.warn({ server: e.server, tool: e.tool, reason: e.reason }, 'tool dropped: its schemas are not of the shape clients read (one such tool fails their whole list)');
    else if (e.rule === 'shape') {
      const noun = e.itemKind === undefined ? 'tool' : ITEM_NOUN[e.itemKind];
      to.log.warn({ server: e.server, [e.itemKind === undefined ? 'tool' : 'item']: e.tool, reason: e.reason }, `${noun} dropped: a field is not of the type clients read (one such item fails their whole list)`);
      return record('catalog/drop', 'denied', `shape: ${e.reason}${e.itemKind === undefined ? '' : ` (a ${noun})`}`);
    } else to.log.warn({ server: e.server, tool: e.tool, reason: e.reason }, 'tool dropped: its x-mcp-header annotation breaks the rules clients hold it to');
    return record('catalog/drop', 'denied', `${e.rule}: ${e.reason}`);
  }
  const message = `${e.blocked ? 'hidden' : 'flagged'}: ${e.flags.map((f) => `${f.code} (${f.field ?? '?'}: ${f.message})`).join('; ')}`;
  to.log.warn({ server: e.server, [e.itemKind === 'tools' ? 'tool' : 'item']: e.tool, flags: e.flags.map((f) => f.code), blocked: e.blocked }, 'description shows signs of poisoning');
  if (e.blocked) record('catalog/quarantine', 'denied', `poisoning ${message}`);
}

/** A plugin failed: already logged by the runner; the ledger keeps a row. */
export function reportPluginFailure(to: ReportSinks, f: PluginFailure): void {
  void to.ledger
    .record(
      { ts: Date.now(), requestId: 'plugin', principal: 'hub', clientEra: '-', method: `plugin/${f.hook}`, server: f.server, hubName: f.tool, group: f.group },
      { outcome: 'rpc_error', errorKind: null, errorCode: -32603, errorMessage: `plugin ${f.plugin} failed in ${f.hook}: ${f.message}`, latencyMs: 0 },
    )
    .catch(() => undefined);
}

/** Flagged instructions: a log line, and an audit row when they are withheld. Changed ones: a log line. */
export function reportInstructions(to: ReportSinks, e: InstructionsEvent): void {
  if (e.flags.length === 0) return void to.log.info({ server: e.server }, 'server instructions changed since the server last gave them (instructions are not pinned)');
  const flags = e.flags.map((f) => `${f.code} (${f.message})`).join('; ');
  to.log.warn(
    { server: e.server, flags: e.flags.map((f) => f.code), blocked: e.blocked, changed: e.changed },
    e.blocked ? 'server instructions show signs of poisoning: left out of what clients get' : 'server instructions show signs of poisoning: passed on with a warning (policy.poisoning: warn)',
  );
  if (!e.blocked) return;
  void to.ledger
    .record(
      { ts: Date.now(), requestId: 'catalog', principal: 'hub', clientEra: '-', method: 'catalog/quarantine', server: e.server },
      { outcome: 'denied', errorKind: 'policy', errorMessage: `poisoning: instructions withheld: ${flags}`, latencyMs: 0 },
    )
    .catch(() => undefined);
}
