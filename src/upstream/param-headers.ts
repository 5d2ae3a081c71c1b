/**
 * `x-mcp-header` mirroring for modern Streamable HTTP upstreams (digest §3.4): a tool's
 * inputSchema may ask that some argument also travel as an `Mcp-Param-<Name>` header. The
 * upstream edge learns the declarations from the `tools/list` pages that pass through it and
 * adds the headers to later `tools/call`s. Dropping tools whose annotation is invalid is the
 * catalog's job; here an invalid declaration is simply not mirrored.
 */
import { argumentAt, declaredParamHeaders, type ParamHeaderDecl } from '../protocol/param-headers.js';
import { encodeHeaderValue } from '../protocol/header-value.js';
import { isObj } from '../protocol/jsonrpc.js';

function headerText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v);
  return undefined;
}

export class ParamHeaderIndex {
  private readonly byTool = new Map<string, ParamHeaderDecl[]>();

  /** Read one `tools/list` result page (or `{ tools }` of a list another connection fetched). */
  learn(result: { tools?: unknown }): void {
    const tools = result.tools;
    if (!Array.isArray(tools)) return;
    for (const t of tools) {
      if (!isObj(t) || typeof t.name !== 'string') continue;
      const decls = declaredParamHeaders(t.inputSchema);
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
      const text = headerText(argumentAt(params.arguments, d.path));
      if (text !== undefined) headers[d.header] = encodeHeaderValue(text);
    }
  }
}
