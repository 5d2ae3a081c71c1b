/**
 * Server-side validation of `Mcp-Param-*` headers (digest §3.4, §6.3; SEP-2243): a tool whose
 * inputSchema marks a property with `x-mcp-header` makes an HTTP client mirror that argument in
 * `Mcp-Param-<Name>`, and a server that serves the schema must check the mirror against the body.
 * A mismatch, a missing header for a present value, or a bad Base64 sentinel is -32020.
 */

import { decodeHeaderValue } from './header-value.js';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_DEPTH = 8;

/** One argument a tool asks clients to mirror: its path from the root and its lower-case header. */
export interface ParamHeaderDecl {
  path: string[];
  header: string;
  type: 'string' | 'integer' | 'boolean';
}
type Decl = ParamHeaderDecl;

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

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
      out.push({ path: p, header: `mcp-param-${h.toLowerCase()}`, type: sub.type });
    scan(sub, p, out);
  }
}

function matches(decl: Decl, value: unknown, text: string): boolean {
  switch (decl.type) {
    case 'string':
      return value === text;
    case 'boolean':
      return (value === true && text === 'true') || (value === false && text === 'false');
    case 'integer':
      return typeof value === 'number' && /^-?\d+$/.test(text) && Number(text) === value;
  }
}

/**
 * What is wrong with the `Mcp-Param-*` headers of one `tools/call`, or null when they mirror the
 * arguments. `header` looks a request header up by lower-case name (already trimmed of OWS).
 */
export function paramHeaderProblem(inputSchema: unknown, args: unknown, header: (name: string) => string | undefined): string | null {
  for (const d of declaredParamHeaders(inputSchema)) {
    let value: unknown = args;
    for (const k of d.path) value = isObj(value) ? value[k] : undefined;
    const raw = header(d.header);
    const name = `Mcp-Param-${d.header.slice('mcp-param-'.length)}`;
    if (value === undefined || value === null) {
      if (raw !== undefined) return `${name} header is present but arguments.${d.path.join('.')} is not`;
      continue;
    }
    if (raw === undefined) return `missing ${name} header for arguments.${d.path.join('.')}`;
    const text = decodeHeaderValue(raw);
    if (text === null) return `${name} header has an invalid Base64 value`;
    if (!matches(d, value, text)) return `${name} header does not match arguments.${d.path.join('.')}`;
  }
  return null;
}
