/**
 * The arguments of prompts/get and completion/complete (digest §3.1): text only. prompts/get
 * `arguments` and completion `context.arguments` map names to strings; completion `argument` is
 * `{name, value}`, both strings. Checked at the hub, so a client's number or object is its own
 * -32602 naming the argument, not an upstream's -32603 carrying its parser's dump (what the
 * SDK servers answer), nor passed to an upstream that does not check.
 */
import { isObj } from './jsonrpc.js';
import { shownName } from './shown-value.js';

function stringMapProblem(where: string, map: unknown): string | undefined {
  if (map === undefined || map === null) return undefined;
  if (!isObj(map)) return `${where} must be an object of strings`;
  // The name as a not-found's is quoted (shownName): a client chose its length.
  for (const [k, v] of Object.entries(map)) if (typeof v !== 'string') return `${where}.${shownName(k)} must be a string`;
  return undefined;
}

/**
 * What is wrong with a prompts/get request's arguments, or undefined: not text, or without one
 * the prompt as listed (`declared`, its `arguments`) marks required, which the digest makes
 * -32602 too (§3.1); an upstream that does not check would fill its template with nothing.
 */
export function promptArgumentsProblem(params: Record<string, unknown>, declared: unknown): string | undefined {
  const shape = stringMapProblem('arguments', params.arguments);
  if (shape || !Array.isArray(declared)) return shape;
  const given = isObj(params.arguments) ? params.arguments : {};
  for (const d of declared)
    if (isObj(d) && d.required === true && typeof d.name === 'string' && !Object.hasOwn(given, d.name)) return `the required argument ${JSON.stringify(d.name)} is missing`;
  return undefined;
}

/** What is wrong with a completion/complete request's argument and context, or undefined. */
export function completionArgumentsProblem(params: Record<string, unknown>): string | undefined {
  const a = params.argument;
  if (!isObj(a) || typeof a.name !== 'string' || typeof a.value !== 'string') return 'argument must be {name, value}, both strings';
  const context = params.context;
  if (context === undefined || context === null) return undefined;
  if (!isObj(context)) return 'context must be an object';
  return stringMapProblem('context.arguments', context.arguments);
}
