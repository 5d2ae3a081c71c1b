import type { ServerConfig } from '../config/types.js';
import { effectiveAnnotations } from '../catalog/annotations.js';
import { compileGlob, meetsUpstream, type Matcher } from './glob.js';
import { baseName } from '../catalog/names.js';
import { argumentSummary } from './confirm-summary.js';

export interface ConfirmPolicy {
  /** Globs over hub tool names that always need the user's confirmation. */
  confirm?: string[];
  /**
   * Confirm every tool whose annotations, as the hub believes them, say it may destroy: a
   * trusted server's own hints, or the config's. Tools of untrusted servers without configured
   * annotations carry the conservative hints (destructive), so they are confirmed too.
   */
  confirmDestructive?: boolean;
}

/** Key of the hub's own confirmation in an `input_required` answer. */
export const CONFIRM_KEY = 'switchyard/confirm';

export class Confirmer {
  private readonly globs: Matcher[];
  /** Those of `globs` that meet upstream names too (meetsUpstream), as a group's deny reads them. */
  private readonly upstreamGlobs: Matcher[];

  constructor(private readonly policy: ConfirmPolicy) {
    this.globs = (policy.confirm ?? []).map(compileGlob);
    this.upstreamGlobs = (policy.confirm ?? []).filter(meetsUpstream).map(compileGlob);
  }

  get active(): boolean {
    return this.globs.length > 0 || this.policy.confirmDestructive === true;
  }

  needed(hubName: string, server: ServerConfig, upstreamName: string, claimed: unknown): boolean {
    // The name before any fixing too: a renamed tool (catalog/filters.ts, denies) is asked about as
    // its siblings are; and, by a glob without `__`, its upstream name, as a group's lists read it.
    const base = baseName(server.prefix, upstreamName);
    if (this.globs.some((g) => g(hubName) || (base !== hubName && g(base)))) return true;
    if (upstreamName !== hubName && this.upstreamGlobs.some((g) => g(upstreamName))) return true;
    if (!this.policy.confirmDestructive) return false;
    const { annotations: a } = effectiveAnnotations(server.trust === 'trusted', claimed, server.tools?.byName?.[upstreamName]?.annotations);
    return a.readOnlyHint !== true && a.destructiveHint !== false;
  }

  /**
   * The elicitation the hub sends: the tool, the server whose it is (a tool without a prefix,
   * or with a prefix other than its server's id, does not say), and its arguments, every one in
   * sight (confirm-summary.ts).
   */
  request(hubName: string, server: string, args: unknown): { method: 'elicitation/create'; params: Record<string, unknown> } {
    const summary = argumentSummary(args);
    return {
      method: 'elicitation/create',
      params: {
        mode: 'form',
        message: `Allow the tool "${hubName}" of the server "${server}" to run with these arguments?\n${summary}`,
        requestedSchema: { type: 'object', properties: {} },
      },
    };
  }
}

/** Whether an elicitation answer is the user's yes (anything else is a no). */
export function accepted(answer: unknown): boolean {
  return verdict(answer) === true;
}

/**
 * A modern retry's answer to the confirmation: true (accept), false (decline or cancel: the user
 * said no), or undefined when it is missing or not an answer, which asks again (digest §5.1)
 * rather than record a decision the user never made.
 */
export function verdict(answer: unknown): boolean | undefined {
  if (!answer || typeof answer !== 'object') return undefined;
  const action = (answer as { action?: unknown }).action;
  return action === 'accept' ? true : action === 'decline' || action === 'cancel' ? false : undefined;
}
