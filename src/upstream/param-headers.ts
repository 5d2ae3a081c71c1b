/**
 * `x-mcp-header` mirroring for modern Streamable HTTP upstreams (digest §3.4): a tool's
 * inputSchema may ask that some argument also travel as an `Mcp-Param-<Name>` header. The
 * upstream edge learns the declarations from the `tools/list` pages that pass through it and
 * adds the headers to later `tools/call`s. Dropping tools whose annotation is invalid is the
 * catalog's job; here an invalid declaration is simply not mirrored.
 */
import { encodeHeaderValue } from './envelope.js';

interface Decl {
  path: string[];
  header: string;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const MAX_DEPTH = 8;

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Declarations reachable from the root through `properties` only, as the spec requires. */
function scan(schema: unknown, path: string[], out: Decl[]): void {
  if (!isObj(schema) || path.length > MAX_DEPTH || !isObj(schema.properties)) return;
  for (const [key, sub] of Object.entries(schema.properties)) {
    if (!isObj(sub)) continue;
    const h = sub['x-mcp-header'];
    const p = [...path, key];
    if (typeof h === 'string' && TOKEN.test(h) && (sub.type === 'string' || sub.type === 'integer' || sub.type === 'boolean')) {
      out.push({ path: p, header: `mcp-param-${h.toLowerCase()}` });
    }
    scan(sub, p, out);
  }
}

function headerText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return undefined;
}

export class ParamHeaderIndex {
  private readonly byTool = new Map<string, Decl[]>();

  /** Read one `tools/list` result page. */
  learn(result: Record<string, unknown>): void {
    const tools = result.tools;
    if (!Array.isArray(tools)) return;
    for (const t of tools) {
      if (!isObj(t) || typeof t.name !== 'string') continue;
      const decls: Decl[] = [];
      scan(t.inputSchema, [], decls);
      if (decls.length > 0) this.byTool.set(t.name, decls);
      else this.byTool.delete(t.name);
    }
  }

  /** Adds the `Mcp-Param-*` headers of one `tools/call` to `headers`. */
  apply(params: Record<string, unknown>, headers: Record<string, string>): void {
    if (this.byTool.size === 0 || typeof params.name !== 'string') return;
    const decls = this.byTool.get(params.name);
    if (decls === undefined) return;
    for (const d of decls) {
      let v: unknown = params.arguments;
      for (const k of d.path) v = isObj(v) ? v[k] : undefined;
      const text = headerText(v);
      if (text !== undefined) headers[d.header] = encodeHeaderValue(text);
    }
  }
}
