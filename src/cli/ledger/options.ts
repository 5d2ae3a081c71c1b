/**
 * The options the subcommands share, declared (filterOptions) and read (filterOf and the
 * readers below): pure functions of what yargs hands over, throwing UsageError (exit 2) for a
 * value that would otherwise match no row and read as "no such calls".
 */
import type { Argv } from 'yargs';
import { SHOWN_OUTCOMES } from '../../ledger/types.js';
import { MAX_LIMIT } from '../../ledger/reader.js';
import type { AuditFilter } from '../../ledger/rows.js';
import { parseWhen } from '../../ledger/when.js';
import { traceIdQuery } from '../../protocol/trace-context.js';
import { requestIdQuery, type RequestIdQuery } from '../../ledger/request-id.js';
import { UsageError } from '../usage-error.js';
import type { CommonArgs } from './ledger-file.js';

/** Each is an array when given more than once (yargs), which filterOf refuses. */
export interface FilterArgs extends CommonArgs {
  server?: string | string[];
  tool?: string | string[];
  principal?: string | string[];
  group?: string | string[];
  outcome?: string | string[];
  method?: string | string[];
  requestId?: string | string[];
  client?: string | string[];
  traceId?: string | string[];
  since?: string | string[];
  until?: string | string[];
}

/**
 * A row count as yargs hands it over: NaN for text (`-n abc`), an array when given twice, a
 * fraction or a negative as typed. Only a whole number from `min` to the reader's MAX_LIMIT is
 * one (else exit 2: a larger one would be cut to the limit without a word).
 */
export function wholeNumber(option: string, value: unknown, min: 0 | 1): number {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= MAX_LIMIT) return value;
  const shown = Array.isArray(value) ? 'given more than once' : typeof value === 'number' && !Number.isNaN(value) ? `not ${value}` : 'not a number';
  const more = typeof value === 'number' && value > MAX_LIMIT ? '; `ledger export` gives every row' : '';
  throw new UsageError(`${option} must be a whole number from ${min} to ${MAX_LIMIT} (${shown})${more}`);
}

/** A text filter as yargs hands it over: an array when given twice, which one SQL parameter cannot take (exit 2). */
export function oneText(option: string, value: string | string[] | undefined): string | undefined {
  if (Array.isArray(value)) throw new UsageError(`${option} must be given once`);
  return value;
}

/**
 * A name filter (--server, --tool, --principal, …): the empty string names nothing a row can
 * hold (no server, tool or principal is named ""), so it matched no row and read as "no such
 * calls", silently. A usage error instead. (`--request-id ''` is not one of these: the empty
 * string is an id a client can send.)
 */
export function nameFilter(option: string, value: string | string[] | undefined, what = 'a name'): string | undefined {
  const v = oneText(option, value);
  // Worded as every empty option is (given-once.ts's notEmpty: `connect --key ''`).
  if (v === '') throw new UsageError(`${option} is empty: give ${what}, or leave the option out (an unset variable in a script?)`);
  return v;
}

/** A time option (--since, --until, --before): epoch ms, or a UsageError saying why not. */
export function timeOption(option: string, value: unknown, now: number): number {
  // Given twice, yargs hands over an array of both.
  if (typeof value !== 'string') throw new UsageError(`${option} must be given once`);
  try {
    return parseWhen(value, now);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/**
 * `--trace-id`: a W3C trace id, 32 hex digits. Stored as the spec writes it, in lower case; one
 * pasted in upper case is the same id. Anything else would match no row and read as "no such
 * calls": a usage error instead.
 */
function traceIdOption(value: string | string[] | undefined): string | undefined {
  const v = oneText('--trace-id', value);
  if (v === undefined) return undefined;
  const id = traceIdQuery(v);
  if (id === undefined) throw new UsageError(`--trace-id must be a W3C trace id, 32 hex digits (the second field of a traceparent), not ${JSON.stringify(v.slice(0, 80))}`);
  return id;
}

/** `--request-id`, read as request-id.ts says: `1` the number, `'"1"'` the string, `abc` a string. */
export function requestIdOption(value: string | string[] | undefined): RequestIdQuery | undefined {
  const v = oneText('--request-id', value);
  if (v === undefined) return undefined;
  try {
    return requestIdQuery(v);
  } catch (err) {
    throw new UsageError(`--request-id: ${(err as Error).message}`);
  }
}

/** The row filter the options name, `now` the instant relative times (--since 1h) count back from. */
export function filterOf(a: FilterArgs, now: number): AuditFilter {
  const when = (option: string, s: string | string[] | undefined): number | undefined => (s === undefined ? undefined : timeOption(option, s, now));
  const since = when('--since', a.since);
  const until = when('--until', a.until);
  // `--since 1h --until 2h` (both back from now, the other way round) is a span no row can be
  // in: it read as "no rows match". A usage error naming both instants instead.
  if (since !== undefined && until !== undefined && since >= until)
    throw new UsageError(`--since (${new Date(since).toISOString()}) is not before --until (${new Date(until).toISOString()}): no row can be in between`);
  return {
    server: nameFilter('--server', a.server),
    tool: nameFilter('--tool', a.tool),
    principal: nameFilter('--principal', a.principal),
    group: nameFilter('--group', a.group),
    outcome: oneText('--outcome', a.outcome),
    method: nameFilter('--method', a.method),
    requestId: requestIdOption(a.requestId)?.stored,
    client: nameFilter('--client', a.client),
    traceId: traceIdOption(a.traceId),
    since,
    until,
  };
}

/** The filter options of query, tail, stats and export, in the order their help lists them. */
export function filterOptions<T>(y: Argv<T>): Argv<T> {
  return y
    .option('server', { type: 'string', describe: 'Only this server id' })
    .option('tool', { type: 'string', describe: 'Only this hub-side tool/prompt name or resource uri' })
    .option('principal', { type: 'string', describe: 'Only this principal' })
    .option('group', { type: 'string', describe: "Only requests through this tool group's endpoint (/mcp/<group>, stdio --group)" })
    // A misspelt outcome would match nothing and look like "no such calls": a usage error instead.
    .option('outcome', { type: 'string', choices: SHOWN_OUTCOMES, describe: 'Only this outcome (replayed: a replayed success; replayed_error: a replayed error, as /metrics counts them)' })
    .option('method', { type: 'string', describe: 'Only this JSON-RPC method (tools/call, tools/list, resources/read, …)' })
    .option('request-id', {
      type: 'string',
      // Its value can be the empty string (`--request-id ''`, an id like any other): left out by
      // mistake (`--request-id --json`), it read as that id and listed its rows or none.
      requiresArg: true,
      describe: `Only the rows of this JSON-RPC request id (the client's), in its JSON form: 1 the number, '"1"' the string (a different request), abc the string abc; rows of the other type are told of on stderr`,
    })
    .option('client', { type: 'string', describe: 'Only this client (the name it gave in clientInfo)' })
    .option('trace-id', { type: 'string', describe: "Only the rows of this W3C trace (32 hex digits): one call's rows in chained hubs' ledgers share it" })
    // requiresArg: the next word is the value even when it starts with a dash (`--since -1h`
    // was read as the flags -1 and -h, "Unknown arguments").
    .option('since', { type: 'string', requiresArg: true, describe: 'From this time: 30m (or -30m), 1h, 2d back, or an ISO date' })
    .option('until', { type: 'string', requiresArg: true, describe: 'Before this time: duration back or ISO date' });
}
