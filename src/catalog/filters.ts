import type { ServerToolsConfig } from '../config/types.js';
import { globMatcher, type Matcher } from '../policy/glob.js';
import { baseName, PREFIX_SEPARATOR } from './names.js';

/**
 * Which tools a server exposes (`servers.<id>.tools.allow` / `deny`, globs on the upstream
 * name) and what a named group shows (`groups.<name>`, selected by the endpoint path
 * `/mcp/<name>`; globs on the hub or the upstream name).
 */

/** allow (when given) must match and deny must not. */
export function toolFilter(tools: Pick<ServerToolsConfig, 'allow' | 'deny'> | undefined): Matcher {
  const allow = globMatcher(tools?.allow);
  const deny = globMatcher(tools?.deny);
  if (!allow && !deny) return () => true;
  return (name) => (!allow || allow(name)) && !(deny && deny(name));
}

export interface GroupConfig {
  /** Server ids whose items the group shows (default: all servers). */
  servers?: string[];
  /** Tool names (globs on the hub or the upstream name) the group shows (default: every tool of its servers). */
  tools?: string[];
  /** Prompt names (globs on the hub or the upstream name) the group shows (default: every prompt of its servers). */
  prompts?: string[];
  /** Tool or prompt names (globs on the hub or the upstream name) the group hides. */
  deny?: string[];
}

export type ItemKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

/** Whether a group glob list matches an item, by its hub name and its upstream name. */
type ItemMatcher = (hubName: string, upstreamName: string) => boolean;

/**
 * A glob with the hub's separator (`x__*`, `*__delete`) is read on hub names only: `x__…` names
 * are server x's (catalog/names.ts), and another server's own tool called `x__delete` must not
 * pass for one of them. The others match the hub or the upstream name (`read_*`).
 */
function itemMatcher(globs: readonly string[] | undefined): ItemMatcher | undefined {
  if (!globs) return undefined;
  const hubOnly = globMatcher(globs.filter((g) => g.includes(PREFIX_SEPARATOR)))!;
  const either = globMatcher(globs.filter((g) => !g.includes(PREFIX_SEPARATOR)))!;
  return (hubName, upstreamName) => hubOnly(hubName) || either(hubName) || either(upstreamName);
}

interface CompiledGroup {
  servers?: Set<string>;
  tools?: ItemMatcher;
  prompts?: ItemMatcher;
  deny?: ItemMatcher;
}

/** Group names usable in a URL path segment. */
export const GROUP_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** What of a group's definition each list kind depends on. */
const FIELDS_OF_KIND: Record<'tools' | 'prompts' | 'resources', readonly (keyof GroupConfig)[]> = {
  tools: ['servers', 'tools', 'deny'],
  prompts: ['servers', 'prompts', 'deny'],
  resources: ['servers'],
};

export class Groups {
  private readonly groups = new Map<string, CompiledGroup>();
  /** Each group's definition as configured (JSON of each field), to tell what a reload changed. */
  private defs = new Map<string, Partial<Record<keyof GroupConfig, string>>>();
  private replaced = 0;

  /**
   * Counts the replacements (reloads) of the groups: a call routed under one version and sent
   * under another looks again at whether its group still shows its tool (Router's call-tool).
   */
  get version(): number {
    return this.replaced;
  }

  constructor(config: Record<string, unknown> | undefined) {
    this.replace(config);
  }

  /**
   * The groups of a reloaded config, in place: the listener's path check and the catalog hold
   * this object, so both see them at once.
   */
  replace(config: Record<string, unknown> | undefined): void {
    this.replaced++;
    this.groups.clear();
    this.defs = new Map();
    for (const [name, raw] of Object.entries(config ?? {})) {
      if (!GROUP_NAME.test(name) || raw === null || typeof raw !== 'object') continue;
      const g = raw as GroupConfig;
      this.defs.set(name, { servers: JSON.stringify(g.servers), tools: JSON.stringify(g.tools), prompts: JSON.stringify(g.prompts), deny: JSON.stringify(g.deny) });
      this.groups.set(name, {
        servers: Array.isArray(g.servers) ? new Set(g.servers) : undefined,
        tools: itemMatcher(g.tools),
        prompts: itemMatcher(g.prompts),
        deny: itemMatcher(g.deny),
      });
    }
  }

  /**
   * The groups of `config` (as replace takes it) whose definition differs from the one in force
   * for a list kind (client-facing kinds: resources stands for both resource lists), by kind;
   * a group new or gone is none (it had no clients, or its clients' sessions end). Kinds no
   * group changed for are left out.
   */
  changedFor(config: Record<string, unknown> | undefined): Map<'tools' | 'prompts' | 'resources', string[]> {
    const next = new Groups(config);
    const out = new Map<'tools' | 'prompts' | 'resources', string[]>();
    for (const [name, now] of next.defs) {
      const was = this.defs.get(name);
      if (!was) continue;
      for (const kind of ['tools', 'prompts', 'resources'] as const)
        if (FIELDS_OF_KIND[kind].some((f) => was[f] !== now[f])) out.set(kind, [...(out.get(kind) ?? []), name]);
    }
    return out;
  }

  has(name: string): boolean {
    return this.groups.has(name);
  }

  names(): string[] {
    return [...this.groups.keys()];
  }

  /** Whether group `name` shows anything of `server` (undefined group = the whole hub). */
  showsServer(name: string | undefined, server: string): boolean {
    if (name === undefined) return true;
    const g = this.groups.get(name);
    return g !== undefined && (g.servers === undefined || g.servers.has(server));
  }

  /**
   * Whether group `name` shows this item; undefined group = the whole hub. Tool and prompt
   * globs match the hub name or the upstream name (`itemMatcher`). Deny globs match the name
   * before any fixing too (`prefix` given: names.ts baseName): a tool renamed because its name
   * reached into another server's names (a prefix "" server's `x__delete` shown as
   * `x_delete_<hash>`) must not slip past the `*__delete` its siblings meet.
   */
  includes(name: string | undefined, kind: ItemKind, server: string, hubName: string, upstreamName: string = hubName, prefix?: string): boolean {
    if (name === undefined) return true;
    const g = this.groups.get(name);
    if (!g) return false;
    if (g.servers && !g.servers.has(server)) return false;
    if (kind === 'tools' && g.tools && !g.tools(hubName, upstreamName)) return false;
    if (kind === 'prompts' && g.prompts && !g.prompts(hubName, upstreamName)) return false;
    if ((kind === 'tools' || kind === 'prompts') && g.deny && denies(g.deny, hubName, upstreamName, prefix)) return false;
    return true;
  }
}

/** A deny list's verdict on a tool or prompt: by its hub name, upstream name, or its name before any fixing. */
function denies(deny: ItemMatcher, hubName: string, upstreamName: string, prefix: string | undefined): boolean {
  if (deny(hubName, upstreamName)) return true;
  if (prefix === undefined) return false;
  const base = baseName(prefix, upstreamName);
  return base !== hubName && deny(base, upstreamName);
}
