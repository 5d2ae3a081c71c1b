import type { Logger } from '../log.js';

/**
 * The plugin API: a plugin is an object with a name and any of four hooks, run in load order
 * (bundled plugins first, then the `plugins/` folder in file-name order, then config
 * `plugins.paths` in order). A hook that throws, rejects or takes longer than the hook timeout
 * is contained: the error is logged and audited, the hook's effect is dropped, the call goes on.
 *
 *  - onList: once per upstream list as it enters the catalog (not per client request; the
 *    result is cached with the list), to flag, hide or rewrite items.
 *  - beforeCall: before a tools/call is forwarded; may deny it or replace its arguments.
 *  - afterCall: after the upstream answered a tools/call; may replace the result.
 *  - onNotification: for each list_changed or resources/updated notification from an upstream, before the hub acts on it; may drop it (a call's progress and log lines do not pass through it).
 */

export type ListKind = 'tools' | 'prompts' | 'resources' | 'resourceTemplates';

export interface PluginServer {
  readonly id: string;
  readonly trust: 'trusted' | 'untrusted';
  /** Protocol era of the upstream connection, once known. */
  readonly era: string | undefined;
}

export interface ItemFlag {
  /** Stable machine-readable code, e.g. "hidden-unicode". */
  code: string;
  message: string;
  /** "poisoning" flags are subject to `policy.poisoning` (warn | block). */
  category?: string;
  /** Where in the item, e.g. "description". */
  field?: string;
}

export interface ListHookContext {
  readonly kind: ListKind;
  readonly server: PluginServer;
  /**
   * The items as they will go downstream (tools carry the annotations the hub will send, with
   * their upstream names), as the hook's own copies. Treat them as read-only; use replace() to
   * change one (a change made in place counts only if the hook succeeds).
   */
  readonly items: readonly Readonly<Record<string, unknown>>[];
  flag(item: Readonly<Record<string, unknown>>, flag: ItemFlag): void;
  hide(item: Readonly<Record<string, unknown>>, reason: string): void;
  replace(item: Readonly<Record<string, unknown>>, next: Record<string, unknown>): void;
  readonly log: Logger;
}

export interface CallTool {
  /** The name the client used. */
  readonly hubName: string;
  readonly upstreamName: string;
  readonly server: PluginServer;
  /** The annotations the hub uses (trusted server or config, else conservative). */
  readonly annotations: Readonly<Record<string, unknown>>;
}

export interface CallHookContext {
  readonly tool: CallTool;
  readonly principal: string;
  /** The tool group the client selected (`/mcp/<group>`), if any. */
  readonly group: string | undefined;
  /**
   * The arguments as they will be forwarded (after earlier plugins). In beforeCall, the hook's
   * own copy: changed in place, it is a rewrite like a returned `{arguments}`.
   */
  readonly arguments: Readonly<Record<string, unknown>>;
  /** Scratch space of this plugin for this call, shared by its beforeCall and afterCall. */
  readonly state: Map<string, unknown>;
  readonly log: Logger;
}

/**
 * Nothing: forward as is. `deny`: answer the client with a tool error instead (a `deny` that is
 * not text still denies; only undefined, null and false are no deny). `arguments`: forward these.
 */
export type BeforeCallResult = void | undefined | { deny: string } | { arguments: Record<string, unknown> };
/**
 * Nothing: keep the result (the hook's `result` is its own copy: a change made to it in place,
 * not returned, has no effect). An object: the result the client gets instead, checked and
 * copied as it is when the hook returns.
 */
export type AfterCallResult = void | undefined | Record<string, unknown>;

export interface NotificationHookContext {
  readonly server: PluginServer;
  readonly method: string;
  readonly params: Readonly<Record<string, unknown>>;
  readonly log: Logger;
}

export type NotificationResult = void | undefined | { drop: true };

type Awaitable<T> = T | Promise<T>;

export interface Plugin {
  readonly name: string;
  onList?(ctx: ListHookContext): Awaitable<void>;
  beforeCall?(ctx: CallHookContext): Awaitable<BeforeCallResult>;
  afterCall?(ctx: CallHookContext, result: Readonly<Record<string, unknown>>): Awaitable<AfterCallResult>;
  onNotification?(ctx: NotificationHookContext): Awaitable<NotificationResult>;
  /** The hub is stopping. */
  close?(): Awaitable<void>;
}

/** What a plugin factory gets: its options from config (`plugins.options.<name>`) and a logger. */
export interface PluginSetup {
  readonly options: Readonly<Record<string, unknown>>;
  readonly log: Logger;
}

/** A plugin module's default export: a plugin, or a factory that makes one. */
export type PluginModule = Plugin | ((setup: PluginSetup) => Awaitable<Plugin>);

/** Identity helper that gives plugin authors type checking. */
export function definePlugin<T extends PluginModule>(plugin: T): T {
  return plugin;
}
