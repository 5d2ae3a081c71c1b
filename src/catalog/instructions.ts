import type { PluginsConfig } from '../config/types.js';
import type { PoisoningPolicy } from './part.js';
import { checkText, DEFAULT_MAX_DESCRIPTION, INSTRUCTIONS_LENGTH_FACTOR, type PoisonFlag } from './poisoning.js';

/**
 * Upstream `instructions` (initialize / server/discover) are text a client puts before the
 * model, as it does tool descriptions, and as untrusted (digest §8.18): they are checked by the
 * bundled `description-checks` plugin's rules (src/catalog/poisoning.ts), read as instructions
 * (TextOptions.instructions: text addressed to the model is what they are for, so only what is
 * hostile whoever it addresses is flagged), and `policy.poisoning` applies: "warn" passes flagged
 * instructions, "block" leaves them out of what clients get. Either way the operator is told once
 * per text (log, audit row when withheld, /admin/servers). They are not pinned: see
 * docs/CATALOG.md.
 */

/**
 * Whether instructions are checked (not when `description-checks` is disabled), and their length
 * limit (INSTRUCTIONS_LENGTH_FACTOR times its `maxLength`).
 */
export interface InstructionChecks {
  enabled: boolean;
  maxLength: number;
}

export function instructionChecks(plugins: PluginsConfig | undefined): InstructionChecks {
  const max = Number(plugins?.options?.['description-checks']?.maxLength);
  return {
    enabled: !(plugins?.disable ?? []).includes('description-checks'),
    maxLength: INSTRUCTIONS_LENGTH_FACTOR * (Number.isInteger(max) && max > 0 ? max : DEFAULT_MAX_DESCRIPTION),
  };
}

export interface InstructionsVerdict {
  flags: PoisonFlag[];
  /** Left out of what clients get: flagged under `policy.poisoning: "block"`. */
  withheld: boolean;
}

export interface InstructionsEvent {
  server: string;
  flags: PoisonFlag[];
  blocked: boolean;
  /** The server gave other instructions before (since the hub started). */
  changed: boolean;
}

export class InstructionScreen {
  /** Each server's last instructions, checks and policy, and the verdict on them. */
  private readonly last = new Map<string, { key: string; text: string; verdict: InstructionsVerdict }>();

  constructor(
    private checks: InstructionChecks,
    private readonly policy: () => PoisoningPolicy,
    private readonly report: (e: InstructionsEvent) => void,
    /** The ids of the configured servers (see headingOf). */
    private readonly servers: () => Iterable<string> = () => [],
  ) {}

  /**
   * Only these servers' verdicts are kept: one that stopped running (removed, disabled) and comes
   * back is a server added, judged and reported afresh (a withheld text gets its row again).
   */
  retain(servers: ReadonlySet<string>): void {
    for (const id of this.last.keys()) if (!servers.has(id)) this.last.delete(id);
  }

  /** The plugins section changed (a reload): checked again at the next look. */
  setChecks(checks: InstructionChecks): void {
    this.checks = checks;
  }

  /**
   * What the checks make of a server's instructions. Reported once: a flagged verdict, and
   * instructions other than the server gave before (not pinned, but not changed unseen either).
   */
  verdict(server: string, text: string): InstructionsVerdict {
    const policy = this.policy();
    const ids = [...this.servers()].filter((id) => id !== server);
    const key = `${this.checks.enabled ? this.checks.maxLength : 'off'}\0${policy}\0${ids.join('\0')}\0\0${text}`;
    const last = this.last.get(server);
    if (last?.key === key) return last.verdict;
    const flags = this.checks.enabled ? checkText(text, 'instructions', { maxLength: this.checks.maxLength, instructions: true }) : [];
    const heading = this.checks.enabled ? headingOf(text, new Set(ids)) : undefined;
    if (heading !== undefined)
      flags.push({ code: 'markup', field: 'instructions', message: `a line headed "[${heading}]", as the hub heads server ${heading}'s instructions: it would read as that server's` });
    const verdict: InstructionsVerdict = { flags, withheld: flags.length > 0 && policy === 'block' };
    this.last.set(server, { key, text, verdict });
    const changed = last !== undefined && last.text !== text;
    if (flags.length || changed) this.report({ server, flags, blocked: verdict.withheld, changed });
    return verdict;
  }
}

/**
 * The id of another server that a line of these instructions starts with as `[id]`: the hub
 * heads each server's instructions so (mergedInstructions), and such a line would pass what
 * follows for that server's.
 */
function headingOf(text: string, others: ReadonlySet<string>): string | undefined {
  if (others.size === 0) return undefined;
  for (const m of text.matchAll(/^\s*\[([^\]\r\n]{1,200})\]/gmu)) if (others.has(m[1]!.trim())) return m[1]!.trim();
  return undefined;
}
