import type { ToolAnnotationOverrides } from '../config/types.js';

/**
 * Tool annotations are hints a server makes about its own tools, and a server that is not
 * trusted could lie ("readOnlyHint: true" on a tool that deletes). Tools of untrusted servers
 * go downstream with the most careful reading of every hint, unless the operator said
 * otherwise in the config; trusted servers keep their own. What the upstream claimed stays
 * available to operators (`switchyard tools --json`), never to the hub's decisions.
 */

/** The spec's defaults for a tool without annotations: assume the worst. */
export const CONSERVATIVE_HINTS = Object.freeze({
  readOnlyHint: false,
  destructiveHint: true,
  idempotentHint: false,
  openWorldHint: true,
});

export type AnnotationSource = 'server' | 'conservative' | 'config';

export interface EffectiveAnnotations {
  annotations: Record<string, unknown>;
  /** Where the hints came from: the trusted server, the conservative defaults, or (partly) the config. */
  source: AnnotationSource;
}

function asObject(v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/**
 * The annotations a tool carries downstream. Untrusted: the conservative hints plus the
 * claimed `title` (display only); trusted: the claim as made. Config overrides win either way.
 */
export function effectiveAnnotations(trusted: boolean, claimed: unknown, override?: ToolAnnotationOverrides): EffectiveAnnotations {
  const c = asObject(claimed);
  let out: Record<string, unknown>;
  let source: AnnotationSource;
  if (trusted) {
    out = c ? { ...c } : {};
    source = 'server';
  } else {
    out = { ...CONSERVATIVE_HINTS };
    if (c && typeof c.title === 'string') out.title = c.title;
    source = 'conservative';
  }
  if (override && Object.keys(override).length > 0) {
    for (const [k, v] of Object.entries(override)) if (v !== undefined) out[k] = v;
    source = 'config';
  }
  return { annotations: out, source };
}

/** The same tool object with its annotations replaced; the original is not touched. */
export function withAnnotations(tool: Record<string, unknown>, annotations: Record<string, unknown>): Record<string, unknown> {
  return { ...tool, annotations };
}
