import type { ArgsVerdict, OutputVerdict } from './validate.js';
import { clippedValue, MAX_URI_DATA, shownName } from '../protocol/shown-value.js';

/** Where a hub-made tool error carries its machine-readable form (always present). */
export const META_ERROR = 'dev.switchyard/error';

/**
 * An upstream's result as the hub relays it: without a `_meta["dev.switchyard/error"]` of the
 * upstream's own, which would pass for the hub's verdict (a retryable EINVAL, say) to a client
 * or plugin that acts on it. Copied only when it has one. A server trusted by config (`trust`
 * "trusted") keeps it: such a server may be a Switchyard hub behind this one, whose verdict
 * (EOUTPUT, or EINVAL against its copy of the tool) is one to act on. The trust is compared
 * only for a result that carries the key: other results cost nothing more.
 */
export function withoutHubError(r: Record<string, unknown>, trust?: string): Record<string, unknown> {
  const m = r._meta;
  if (typeof m !== 'object' || m === null || !Object.hasOwn(m, META_ERROR) || trust === 'trusted') return r;
  const { [META_ERROR]: _theirs, ...rest } = m as Record<string, unknown>;
  const out = { ...r };
  if (Object.keys(rest).length) out._meta = rest;
  else delete out._meta;
  return out;
}

export interface HubToolError {
  /** EINVAL: arguments do not match the schema; ESCHEMA: the tool's schema cannot be used; EOUTPUT: the result does not match. */
  code: 'EINVAL' | 'ESCHEMA' | 'EOUTPUT';
  message: string;
  retryable: boolean;
  /** JSON pointer into the arguments (EINVAL) or the structured result (EOUTPUT). */
  pointer?: string;
}

/**
 * An `isError` tool result the model can read. The structured error is always in `_meta`,
 * and also in `structuredContent` when the tool has no outputSchema (clients validate
 * structuredContent against it even on errors).
 */
export function hubToolError(error: HubToolError, hasOutputSchema: boolean): Record<string, unknown> {
  const r: Record<string, unknown> = { content: [{ type: 'text', text: error.message }], isError: true, _meta: { [META_ERROR]: error } };
  if (!hasOutputSchema) r.structuredContent = { error };
  return r;
}

/**
 * A pointer as the error gives it: in its message as a name is quoted (shownName), in `pointer`
 * whole up to MAX_URI_DATA, the cut marked past it. Its property names are the client's (an
 * argument the schema does not allow) or the upstream's: a megabyte one came back five times.
 */
function shownPointer(pointer: string): { inMessage: string; pointer: string } {
  return { inMessage: shownName(pointer), pointer: clippedValue(pointer, MAX_URI_DATA) };
}

export function argsErrorResult(hubName: string, v: Exclude<ArgsVerdict, { ok: true }>, hasOutputSchema: boolean): Record<string, unknown> {
  if (v.kind === 'invalid') {
    const p = shownPointer(v.pointer);
    return hubToolError({ code: 'EINVAL', message: `Invalid arguments for tool ${hubName}: arguments${p.inMessage} ${v.reason}`, retryable: true, pointer: p.pointer }, hasOutputSchema);
  }
  return hubToolError(
    { code: 'ESCHEMA', message: `Tool ${hubName} is quarantined by the hub: ${v.reason}`, retryable: false },
    hasOutputSchema,
  );
}

/** `byPlugins`: the result as afterCall hooks left it failed, not the upstream's own. */
export function outputErrorResult(hubName: string, v: Exclude<OutputVerdict, { ok: true }>, byPlugins = false): Record<string, unknown> {
  const whose = byPlugins ? `'s result as plugin hooks left it does not match` : ' returned a result that does not match';
  const p = shownPointer(v.pointer);
  return hubToolError({ code: 'EOUTPUT', message: `Tool ${hubName}${whose} its outputSchema: structuredContent${p.inMessage} ${v.reason}`, retryable: false, pointer: p.pointer }, true);
}
