/**
 * The answers of the admin routes the CLI reads, checked where they come in (admin-request.ts):
 * JSON of another shape is another program's on that port, said as such, where a command that
 * trusted it would fail on a TypeError deep in its printing. Each check covers what the commands
 * read, no more: a newer daemon may add fields, and fields older daemons leave out stay optional.
 */
import type { ReloadOutcome } from '../config/watch.js';
import type { ItemView, ServerView, ToolView } from '../downstream/admin-views.js';
import type { ReloadReport } from '../hub/reload.js';
import { isObj } from '../protocol/jsonrpc.js';

/** Whether a parsed body is what a route's hub answers. */
export type AnswerShape<T> = (body: unknown) => body is T;


const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const stringOrNull = (v: unknown): boolean => v === null || typeof v === 'string';
const optional = (v: unknown, check: (v: unknown) => boolean): boolean => v === undefined || check(v);

function isServerView(v: unknown): v is ServerView {
  return (
    isObj(v) &&
    typeof v.id === 'string' &&
    typeof v.state === 'string' &&
    typeof v.restarts === 'number' &&
    typeof v.since === 'number' &&
    stringOrNull(v.lastError) &&
    optional(v.era, stringOrNull) &&
    optional(v.stderr, stringOrNull) &&
    optional(v.listError, stringOrNull) &&
    optional(v.serverInfo, (i) => i === null || isObj(i)) &&
    optional(v.tools, (n) => n === null || typeof n === 'number')
  );
}

function isToolView(v: unknown): v is ToolView {
  return (
    isObj(v) &&
    typeof v.name === 'string' &&
    typeof v.server === 'string' &&
    typeof v.upstreamName === 'string' &&
    typeof v.trust === 'string' &&
    isStrings(v.flags) &&
    optional(v.era, stringOrNull) &&
    optional(v.pin, isObj) &&
    optional(v.details, (d) => Array.isArray(d) && d.every(isObj))
  );
}

/** GET /admin/servers (and what `doctor` reads of it besides the list: pid and version, when said). */
export const serversAnswer: AnswerShape<{ servers: ServerView[]; disabled?: string[]; pid?: number; version?: string }> = (
  b,
): b is { servers: ServerView[]; disabled?: string[]; pid?: number; version?: string } =>
  isObj(b) && Array.isArray(b.servers) && b.servers.every(isServerView) && (b.disabled === undefined || (Array.isArray(b.disabled) && b.disabled.every((d) => typeof d === 'string')));

/** GET /admin/tools. */
export const toolsAnswer: AnswerShape<{ tools: ToolView[] }> = (b): b is { tools: ToolView[] } => isObj(b) && Array.isArray(b.tools) && b.tools.every(isToolView);

/**
 * GET /admin/tools?kind=K (K not tools): the items of that kind; or, from a daemon older than the
 * `kind` query, its tools (the CLI says so rather than list tools as prompts).
 */
export function itemsAnswer(kind: string): AnswerShape<{ kind: string; items: ItemView[] } | { tools: ToolView[] }> {
  return (b): b is { kind: string; items: ItemView[] } | { tools: ToolView[] } => (isObj(b) && b.kind === kind && Array.isArray(b.items) && b.items.every(isToolView)) || toolsAnswer(b);
}

/** POST /admin/pins/changed. */
export const pinsChangedAnswer: AnswerShape<{ changed: boolean }> = (b): b is { changed: boolean } => isObj(b) && typeof b.changed === 'boolean';

/** POST /admin/servers/<id>/restart. */
export const restartAnswer: AnswerShape<{ restarted: string }> = (b): b is { restarted: string } => isObj(b) && typeof b.restarted === 'string';

function isReloadReport(r: unknown): r is ReloadReport {
  return (
    isObj(r) &&
    ['added', 'removed', 'restarted', 'updated', 'applied', 'restartOnly'].every((k) => isStrings(r[k])) &&
    optional(r.disabled, isStrings) &&
    optional(r.pluginsFailed, isStrings) &&
    optional(r.pluginsNotLoaded, isStrings) &&
    optional(r.earlier, (e) => isObj(e) && typeof e.at === 'string' && isReloadReport(e.report))
  );
}

/** POST /admin/reload: how the reload ended (also the body of its 422 and 500). */
export const reloadAnswer: AnswerShape<ReloadOutcome<ReloadReport>> = (b): b is ReloadOutcome<ReloadReport> => {
  if (!isObj(b)) return false;
  switch (b.status) {
    case 'applied':
      return isReloadReport(b.report);
    case 'unchanged':
      return true;
    case 'rejected':
      return isStrings(b.problems);
    case 'failed':
      return typeof b.error === 'string';
    default:
      return false;
  }
};
