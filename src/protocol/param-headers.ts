/**
 * Server-side validation of `Mcp-Param-*` headers (digest §3.4, §6.3; SEP-2243): a tool whose
 * inputSchema marks a property with `x-mcp-header` makes an HTTP client mirror that argument in
 * `Mcp-Param-<Name>`, and a server that serves the schema must check the mirror against the body.
 * A mismatch, a missing header for a present value, or a bad Base64 sentinel is -32020. A
 * header for an absent (or null) argument mirrors nothing: the client M! omit it (§3.4), and the
 * server ignores it, as the SDK v2 server does and as the edge treats an Mcp-Name with no name.
 */

import { decodeHeaderValue } from './header-value.js';
import { isObj } from './jsonrpc.js';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_DEPTH = 8;

/** One argument a tool asks clients to mirror: its path from the root and its header. */
export interface ParamHeaderDecl {
  path: string[];
  /** Lower-case, to look the header up by. */
  header: string;
  /** As the schema spells it (`Mcp-Param-Region`), to name it in an error. */
  name: string;
  type: 'string' | 'integer' | 'boolean';
}
type Decl = ParamHeaderDecl;

/** The `x-mcp-header` declarations of an inputSchema (both the client and the server side use them). */
export function declaredParamHeaders(inputSchema: unknown): ParamHeaderDecl[] {
  const out: Decl[] = [];
  scan(inputSchema, [], out);
  return out;
}

/** Declarations reachable from the root through `properties` only; others are not mirrored. */
function scan(schema: unknown, path: string[], out: Decl[]): void {
  if (!isObj(schema) || path.length > MAX_DEPTH || !isObj(schema.properties)) return;
  for (const [key, sub] of Object.entries(schema.properties)) {
    if (!isObj(sub)) continue;
    const h = sub['x-mcp-header'];
    const p = [...path, key];
    if (typeof h === 'string' && TOKEN.test(h) && (sub.type === 'string' || sub.type === 'integer' || sub.type === 'boolean'))
      out.push({ path: p, header: `mcp-param-${h.toLowerCase()}`, name: `Mcp-Param-${h}`, type: sub.type });
    scan(sub, p, out);
  }
}

/** Keywords whose values are subschemas (one, a map of them, or a list): where an annotation could hide. */
const ONE = ['additionalProperties', 'items', 'contains', 'not', 'if', 'then', 'else', 'propertyNames', 'unevaluatedProperties', 'unevaluatedItems', 'additionalItems'];
const MAP = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
const LIST = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];

interface At {
  schema: Record<string, unknown>;
  step: string;
  parent: At | undefined;
  /** Reached from the root through `properties` alone. */
  viaProperties: boolean;
  depth: number;
}

/** Where in the schema, for the log: the last few steps of a deep path. */
const pathOf = (at: At): string => {
  const steps: string[] = [];
  let a: At | undefined = at;
  for (; a?.parent && steps.length < 8; a = a.parent) steps.push(a.step);
  if (steps.length === 0) return '(the root)';
  return (a?.parent ? '…/' : '/') + steps.reverse().join('/');
};

/**
 * Why a tool's `x-mcp-header` annotations break the rules an HTTP client holds them to (digest
 * §3.4: such a tool M! be dropped), or null. A name that is a non-empty token, unique ignoring
 * case, on a `string`, `integer` or `boolean` property reached from the root through
 * `properties` alone (not `items`, a composition, a conditional or a definition), at most
 * MAX_DEPTH + 1 properties down: exactly what declaredParamHeaders mirrors and checks. Walked
 * with a stack of its own, so no schema is too deep to look through.
 */
export function paramHeaderAnnotationProblem(inputSchema: unknown): string | null {
  if (!isObj(inputSchema)) return null;
  const seen = new Set<string>();
  const stack: At[] = [{ schema: inputSchema, step: '', parent: undefined, viaProperties: true, depth: 0 }];
  const push = (sub: unknown, step: string, parent: At, viaProperties: boolean) => {
    if (isObj(sub)) stack.push({ schema: sub, step, parent, viaProperties, depth: parent.depth + 1 });
  };
  for (let at = stack.pop(); at; at = stack.pop()) {
    const schema = at.schema;
    if ('x-mcp-header' in schema) {
      const h = schema['x-mcp-header'];
      const where = pathOf(at);
      if (typeof h !== 'string' || !TOKEN.test(h)) return `${where}: the header name ${JSON.stringify(h)} is not a non-empty token`;
      if (!at.viaProperties || at.depth === 0) return `${where}: "${h}" is not on a property reached through properties alone`;
      if (at.depth > MAX_DEPTH + 1) return `${where}: "${h}" is nested more than ${MAX_DEPTH + 1} properties deep`;
      if (schema.type !== 'string' && schema.type !== 'integer' && schema.type !== 'boolean')
        return `${where}: "${h}" is on a property of type ${JSON.stringify(schema.type ?? null)} (only string, integer or boolean)`;
      if (seen.has(h.toLowerCase())) return `${where}: "${h}" is declared twice (names are compared ignoring case)`;
      seen.add(h.toLowerCase());
    }
    for (const k of MAP) {
      const m = schema[k];
      if (isObj(m)) for (const [key, sub] of Object.entries(m)) push(sub, `${k}/${key}`, at, at.viaProperties && k === 'properties');
    }
    for (const k of ONE) push(schema[k], k, at, false);
    for (const k of LIST) {
      const list = schema[k];
      if (Array.isArray(list)) list.forEach((sub, i) => push(sub, `${k}/${i}`, at, false));
    }
  }
  return null;
}

/**
 * The argument at `path`, read through objects and their own keys only: an argument named
 * `constructor` or `toString` that the client left out is absent, not Object's (which made its
 * header "missing" and refused the call).
 */
export function argumentAt(args: unknown, path: readonly string[]): unknown {
  let v = args;
  for (const k of path) v = isObj(v) && Object.hasOwn(v, k) ? v[k] : undefined;
  return v;
}

/**
 * Whether header `text` mirrors `value`, a primitive: of the declared type, as that type is
 * written (an integer compared as a number); of another type (a string "7" where an integer is
 * declared), as it would be written, for the schema check to refuse the argument itself (a
 * tool error saying what is wrong with it) rather than a header that mirrors it faithfully.
 */
function matches(decl: Decl, value: string | number | boolean, text: string): boolean {
  if (decl.type === 'integer' && Number.isSafeInteger(value)) return /^-?\d+$/.test(text) && Number(text) === value;
  return String(value) === text;
}

/**
 * What is wrong with the `Mcp-Param-*` headers of one `tools/call`, or null when they mirror the
 * arguments. `header` looks a request header up by lower-case name (already trimmed of OWS).
 */
export function paramHeaderProblem(inputSchema: unknown, args: unknown, header: (name: string) => string | undefined): string | null {
  for (const d of declaredParamHeaders(inputSchema)) {
    const value = argumentAt(args, d.path);
    if (value === undefined || value === null) continue;
    // An object or an array has no header form (digest §3.4): nothing to mirror, and the
    // argument is the schema check's to refuse (as the SDK v2 server has it), not the header's.
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    const raw = header(d.header);
    const text = raw === undefined ? undefined : decodeHeaderValue(raw);
    if (typeof text === 'string' && matches(d, value, text)) continue;
    // Nor has a string with a lone surrogate (no UTF-8, so no sentinel carries it): `switchyard
    // connect` mirrored one as U+FFFD and its stdio client was refused for a header it never sent,
    // where `stdio` runs the call. Looked at on a mismatch only, as Mcp-Name's (modern-envelope.ts).
    if (typeof value === 'string' && !value.isWellFormed()) continue;
    if (raw === undefined) return `missing ${d.name} header for arguments.${d.path.join('.')}`;
    if (text === null) return `${d.name} header has an invalid Base64 value`;
    return `${d.name} header does not match arguments.${d.path.join('.')}`;
  }
  return null;
}
