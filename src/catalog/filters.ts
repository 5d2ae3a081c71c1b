import type { ServerToolsConfig } from '../config/types.js';
import { globMatcher, type Matcher } from '../policy/glob.js';

/**
 * Which tools a server exposes (`servers.<id>.tools.allow` / `deny`, globs on the upstream
 * name) and what a named group shows (`groups.<name>`, selected by the endpoint path
 * `/mcp/<name>`; globs on hub names).
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

interface CompiledGroup {
  servers?: Set<string>;
  tools?: Matcher;
  prompts?: Matcher;
  deny?: Matcher;
}

/** Group names usable in a URL path segment. */
export const GROUP_NAME = /^[A-Za-z0-9_-]{1,64}$/;

export class Groups {
  private readonly groups = new Map<string, CompiledGroup>();

  constructor(config: Record<string, unknown> | undefined) {
    this.replace(config);
  }

  /**
   * The groups of a reloaded config, in place: the listener's path check and the catalog hold
   * this object, so both see them at once.
   */
  replace(config: Record<string, unknown> | undefined): void {
    this.groups.clear();
    for (const [name, raw] of Object.entries(config ?? {})) {
      if (!GROUP_NAME.test(name) || raw === null || typeof raw !== 'object') continue;
      const g = raw as GroupConfig;
      this.groups.set(name, {
        servers: Array.isArray(g.servers) ? new Set(g.servers) : undefined,
        tools: globMatcher(g.tools),
        prompts: globMatcher(g.prompts),
        deny: globMatcher(g.deny),
      });
    }
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
   * globs match the hub name or the upstream name.
   */
  includes(name: string | undefined, kind: ItemKind, server: string, hubName: string, upstreamName: string = hubName): boolean {
    if (name === undefined) return true;
    const g = this.groups.get(name);
    if (!g) return false;
    if (g.servers && !g.servers.has(server)) return false;
    const either = (m: Matcher) => m(hubName) || m(upstreamName);
    if (kind === 'tools' && g.tools && !either(g.tools)) return false;
    if (kind === 'prompts' && g.prompts && !either(g.prompts)) return false;
    if ((kind === 'tools' || kind === 'prompts') && g.deny && either(g.deny)) return false;
    return true;
  }
}
