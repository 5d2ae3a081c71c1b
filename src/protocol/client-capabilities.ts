import type { ClientCapabilities } from './types.js';
import { isObj } from './jsonrpc.js';
import { setField } from './copy.js';
import { INVALID_PARAMS, METHOD_NOT_FOUND } from './errors.js';

/**
 * Whether a client declared what a server → client request needs (digest §2.1, §5.1): an
 * elicitation of its mode (`elicitation: {}` is form only; `{url: {}}` is URL only; both keys,
 * both), a sampling request with `tools` only under `sampling.tools`, roots under `roots`. A
 * method it does not know, never.
 */
export function declares(caps: ClientCapabilities, method: string, params?: Record<string, unknown>): boolean {
  switch (method) {
    case 'elicitation/create':
      return elicits(caps, params?.mode === 'url' ? 'url' : 'form');
    case 'sampling/createMessage':
      return !!caps.sampling && (!usesTools(params) || !!(caps.sampling as { tools?: unknown }).tools);
    case 'roots/list':
      return !!caps.roots;
    default:
      return false;
  }
}

/** A tool-enabled sampling request: `tools` or `toolChoice` (either needs `sampling.tools`; 2025-11-25 sampling). */
function usesTools(params: Record<string, unknown> | undefined): boolean {
  return params?.tools !== undefined || params?.toolChoice !== undefined;
}

/** Whether the client takes elicitations of this mode. */
export function elicits(caps: ClientCapabilities, mode: 'form' | 'url'): boolean {
  const e = caps.elicitation;
  if (!e || typeof e !== 'object') return false;
  if (e.form === undefined && e.url === undefined) return mode === 'form';
  return e[mode] !== undefined;
}

/** The capability a client would have to declare for it (the `-32021` error's `requiredCapabilities`). */
export function required(method: string, params?: Record<string, unknown>): Record<string, unknown> {
  switch (method) {
    case 'elicitation/create':
      return { elicitation: params?.mode === 'url' ? { url: {} } : { form: {} } };
    case 'sampling/createMessage':
      return { sampling: usesTools(params) ? { tools: {} } : {} };
    case 'roots/list':
      return { roots: {} };
    default:
      return { [method]: {} };
  }
}

/**
 * What `required()` (or several merged) names, as a person reads it: `sampling.tools`,
 * `elicitation.url`, `roots`. The family alone would tell a client that declared `sampling`
 * but not its `tools` that it did not declare sampling.
 */
export function requiredNames(need: Record<string, unknown>): string {
  const names: string[] = [];
  for (const [family, value] of Object.entries(need)) {
    const members = isObj(value) ? Object.keys(value) : [];
    if (members.length === 0) names.push(family);
    else for (const m of members) names.push(`${family}.${m}`);
  }
  return names.join(', ');
}

/**
 * Adds one request's `required()` to what several need, member by member within a family: a
 * round asking a form and a URL elicitation needs `elicitation: {form, url}`, not whichever
 * came last.
 */
export function addRequired(need: Record<string, unknown>, more: Record<string, unknown>): Record<string, unknown> {
  for (const [family, value] of Object.entries(more)) {
    const had = Object.hasOwn(need, family) ? need[family] : undefined;
    setField(need, family, isObj(had) && isObj(value) ? Object.assign({}, had, value) : value);
  }
  return need;
}

/** Families whose value is an object in both eras' schemas, and their members that are objects too (digest §2.1, §2.2). */
const SHAPE: Record<string, readonly string[]> = {
  roots: [],
  sampling: ['context', 'tools'],
  elicitation: ['form', 'url'],
  tasks: ['requests'],
  experimental: [],
  extensions: [],
};

/**
 * What is wrong with a client's capabilities (for a -32602), or undefined. Only the shapes the
 * hub reads are checked — families it does not know pass, as the schemas allow — so a malformed
 * one is refused at the edge instead of failing at whichever upstream the call reaches (a
 * modern one refuses the envelope, a legacy one never sees it).
 */
export function capabilitiesProblem(caps: unknown): string | undefined {
  if (!isObj(caps)) return 'must be an object';
  for (const family in SHAPE) {
    const v = caps[family];
    if (v === undefined) continue;
    if (!isObj(v)) return `${family} must be an object`;
    for (const member of SHAPE[family]!) if (v[member] !== undefined && !isObj(v[member])) return `${family}.${member} must be an object`;
  }
  return undefined;
}

/** What is wrong with a client's Implementation (clientInfo: `name` and `version` are required), or undefined. */
export function implementationProblem(info: unknown): string | undefined {
  if (!isObj(info)) return 'must be an object';
  if (typeof info.name !== 'string') return 'name must be a string';
  if (typeof info.version !== 'string') return 'version must be a string';
  return undefined;
}

/**
 * The error code a client answers a server → client request it did not declare (declares is
 * false) with, as the SDK clients do: -32602 when it declared the family but not what this
 * request uses (an elicitation of another mode, the schema's "server requests an elicitation mode
 * not declared in client capabilities"; sampling with tools without `sampling.tools`), -32601
 * when it declared none of it (no `elicitation`, `sampling`, `roots`): that method is not one it
 * serves. The hub answers an upstream so on behalf of such a client.
 */
export function undeclaredCode(caps: ClientCapabilities, method: string): number {
  const family = method === 'elicitation/create' ? 'elicitation' : method === 'sampling/createMessage' ? 'sampling' : undefined;
  return family !== undefined && isObj((caps as Record<string, unknown>)[family]) ? INVALID_PARAMS : METHOD_NOT_FOUND;
}
