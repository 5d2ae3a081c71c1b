import type { Logger } from '../log.js';
import { isObj } from '../protocol/jsonrpc.js';
import type {
  CallHookContext,
  CallTool,
  ItemFlag,
  ListKind,
  Plugin,
  PluginServer,
} from './types.js';

/** A plugin hook failed; the hub logs and audits it and goes on without the hook's effect. */
export interface PluginFailure {
  plugin: string;
  hook: 'onList' | 'beforeCall' | 'afterCall' | 'onNotification' | 'load' | 'close';
  message: string;
  server?: string;
  tool?: string;
  /** The tool group of the call's endpoint: its row is among the group's (`ledger --group`). */
  group?: string;
}

export const DEFAULT_HOOK_TIMEOUT_MS = 5_000;

/**
 * The hub's own (bundled) plugins, as the loader made them. They never change what they are
 * given in place, so their hooks get the hub's objects without a copy: redact-secrets'
 * afterCall runs on every call, and a copy of every result would cost time and garbage.
 */
export const HUB_PLUGINS = new WeakSet<Plugin>();

/**
 * Whether an item a plugin's onList left can go downstream in place of `was` (the item as the
 * hook was given it): the item as it goes, or why not. The catalog's (catalog/part.ts): the
 * same checks an upstream's items meet, and the name it routes by unchanged.
 */
export type ListItemCheck = (left: Record<string, unknown>, was: Record<string, unknown>, index: number) => { item: Record<string, unknown> } | { problem: string };

/** What the onList hooks made of one upstream list, by item index. */
export interface ListOutcome {
  items: Record<string, unknown>[];
  flags: Map<number, (ItemFlag & { plugin: string })[]>;
  hidden: Map<number, string>;
}

export interface CallPlan {
  /** Set when a plugin denied the call. */
  deny?: { plugin: string; reason: string };
  arguments: Record<string, unknown>;
  /** Per-plugin scratch, handed to afterCall; made when a plugin first reads `ctx.state`. */
  states?: Map<string, Map<string, unknown>>;
  /** The plugins beforeCall ran: afterCall runs the same ones, even if a reload replaced them meanwhile. */
  plugins?: readonly Plugin[];
}

/**
 * A call hook's context. `state` is made when the plugin first reads it: most plugins never
 * do, and two Maps per call for nothing were a cost on every tools/call. A class with a getter:
 * an object literal with a getter, made per call, outlived young-generation GCs (~70 KB
 * promoted per scavenge at concurrency 16; test/integration/gc-promotion.test.ts). The call's
 * plan is held in private fields, out of a plugin's reach.
 */
class HookContext implements CallHookContext {
  readonly tool: CallTool;
  readonly principal: string;
  readonly group: string | undefined;
  readonly arguments: Readonly<Record<string, unknown>>;
  readonly log: Logger;
  readonly #plan: CallPlan;
  readonly #plugin: string;

  constructor(tool: CallTool, principal: string, group: string | undefined, args: Readonly<Record<string, unknown>>, log: Logger, plan: CallPlan, plugin: string) {
    this.tool = tool;
    this.principal = principal;
    this.group = group;
    this.arguments = args;
    this.log = log;
    this.#plan = plan;
    this.#plugin = plugin;
  }

  get state(): Map<string, unknown> {
    const states = (this.#plan.states ??= new Map());
    let s = states.get(this.#plugin);
    if (!s) states.set(this.#plugin, (s = new Map()));
    return s;
  }
}

class HookTimeout extends Error {
  constructor(ms: number) {
    super(`did not finish within ${ms} ms`);
  }
}

/** A hook's outcome inside its guard: its value, or nothing (it failed, and was reported). */
type Guarded<T> = { ok: true; value: T } | { ok: false };

function isThenable<T>(v: T | Promise<T>): v is Promise<T> {
  return v !== null && (typeof v === 'object' || typeof v === 'function') && typeof (v as { then?: unknown }).then === 'function';
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Runs plugin hooks in load order with errors contained. Plugins load asynchronously (dynamic
 * import); every hook entry waits for loading first, which costs nothing once it is done.
 */
export class PluginRunner {
  private plugins: Plugin[] = [];
  private loaded = false;
  private readonly ready: Promise<void>;
  /** The last replace() (they run one after another); starts once the first plugins are loaded. */
  private replacing: Promise<void>;
  private closed = false;
  private hasCallHooks = false;
  private hasBeforeCall = false;
  /** One child logger per plugin, made on first use: a pino child per call showed in profiles. */
  private readonly logs = new Map<string, Logger>();

  constructor(
    plugins: Promise<Plugin[]> | Plugin[],
    private readonly log: Logger,
    private readonly onFailure: (f: PluginFailure) => void,
    private readonly timeoutMs = DEFAULT_HOOK_TIMEOUT_MS,
  ) {
    this.ready = Promise.resolve(plugins).then(
      (ps) => {
        this.use(ps);
        this.loaded = true;
      },
      (err: unknown) => {
        this.loaded = true;
        this.fail({ plugin: '(loader)', hook: 'load', message: messageOf(err) });
      },
    );
    this.replacing = this.ready;
  }

  /** The plugins hooks run now (a reload keeps one of them whose file no longer loads). */
  get current(): readonly Plugin[] {
    return this.plugins;
  }

  /** The plugins hooks run from now on. */
  private use(ps: Plugin[]): void {
    this.plugins = ps;
    this.hasCallHooks = ps.some((p) => p.beforeCall || p.afterCall);
    this.hasBeforeCall = ps.some((p) => p.beforeCall);
    this.logs.clear();
  }

  /** Resolves once plugins are loaded (never rejects). */
  whenReady(): Promise<void> {
    return this.ready;
  }

  names(): string[] {
    return this.plugins.map((p) => p.name);
  }

  /** False when no loaded plugin has a call hook: the router can skip call-hook work entirely. */
  get callHooks(): boolean {
    return !this.loaded || this.hasCallHooks;
  }

  private fail(f: PluginFailure): void {
    this.log.error(f, 'plugin failed; its effect is dropped');
    try {
      this.onFailure(f);
    } catch (err) {
      this.log.error({ err: messageOf(err) }, 'could not report a plugin failure');
    }
  }

  /**
   * Runs fn with the hook timeout; a throw, rejection or timeout is reported and yields
   * undefined. A hook that returns at once (redact-secrets' afterCall, on every call) needs no
   * timer: nothing could have cut it short anyway, so only a promise races the timeout, and its
   * outcome is given at once, not as a promise (a call's hooks take no turn of their own then).
   */
  private guard<T>(p: Plugin, hook: PluginFailure['hook'], where: Pick<PluginFailure, 'server' | 'tool' | 'group'>, fn: () => T | Promise<T>): Guarded<T> | Promise<Guarded<T>> {
    let out: T | Promise<T>;
    let pending: boolean;
    try {
      out = fn();
      // Inside the try: reading `then` off a hook's answer runs its getter, which may throw.
      pending = isThenable(out);
    } catch (err) {
      this.fail({ plugin: p.name, hook, message: messageOf(err), ...where });
      return { ok: false };
    }
    return pending ? this.raced(p, hook, where, out as Promise<T>) : { ok: true, value: out as T };
  }

  private async raced<T>(p: Plugin, hook: PluginFailure['hook'], where: Pick<PluginFailure, 'server' | 'tool' | 'group'>, out: Promise<T>): Promise<Guarded<T>> {
    let timer: NodeJS.Timeout | undefined;
    try {
      const value = await Promise.race([
        out,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new HookTimeout(this.timeoutMs)), this.timeoutMs);
          timer.unref();
        }),
      ]);
      return { ok: true, value };
    } catch (err) {
      this.fail({ plugin: p.name, hook, message: messageOf(err), ...where });
      return { ok: false };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  async list(kind: ListKind, server: PluginServer, items: Record<string, unknown>[], check?: ListItemCheck): Promise<ListOutcome> {
    await this.ready;
    const out: ListOutcome = { items, flags: new Map(), hidden: new Map() };
    const listing = this.plugins.filter((p) => p.onList);
    if (listing.length === 0 || items.length === 0) return out;
    // The items are the hub's own objects (a tool's nested inputSchema is the upstream's copy,
    // which its pin is worked out from): an operator's plugin gets copies of them, and what it
    // leaves, once it succeeded (replacements, and changes it made in place), is taken as a JSON
    // copy; a plugin that fails leaves nothing. The hub's own plugins (HUB_PLUGINS) only read,
    // and get the items as they are.
    let current = items.slice();
    for (const p of listing) {
      const own = HUB_PLUGINS.has(p);
      const flags: [number, ItemFlag][] = [];
      const hidden: [number, string][] = [];
      const replaced: [number, Record<string, unknown>][] = [];
      const unusable: string[] = [];
      const r = await this.guard(p, 'onList', { server: server.id }, () => {
        // Items came in as JSON, and replacements leave as JSON: they can be copied.
        const given = own ? current : current.map((it) => structuredClone(it));
        const index = new Map<object, number>();
        given.forEach((it, i) => index.set(it, i));
        const at = (item: object): number => {
          const i = index.get(item);
          if (i === undefined) throw new Error('flag/hide/replace: not an item of this list');
          return i;
        };
        const ctx = {
          kind,
          server,
          items: given as readonly Readonly<Record<string, unknown>>[],
          flag: (item: object, f: ItemFlag) => void flags.push([at(item), { code: String(f.code), message: String(f.message), category: f.category, field: f.field }]),
          hide: (item: object, reason: string) => void hidden.push([at(item), String(reason)]),
          replace: (item: object, next: Record<string, unknown>) => {
            if (next === null || typeof next !== 'object') throw new Error('replace: the new item must be an object');
            replaced.push([at(item), next]);
          },
          log: this.logOf(p),
        };
        const left = (): Record<string, unknown>[] | undefined => {
          if (own && replaced.length === 0) return undefined;
          const next = given.slice();
          for (const [i, item] of replaced) next[i] = item;
          const out = own ? next : jsonCopy(next);
          // What clients would get, checked as an upstream's items are: one a client cannot read
          // failed their whole list (an SDK client's listTools threw, every server's tools with it).
          // Such an item goes on as the hook was given it, and the rest of what the hook did (its
          // hides among it) stands: failing the whole hook would show what it hid.
          if (check)
            for (let i = 0; i < out.length; i++) {
              if (out[i] === current[i]) continue;
              const c = check(out[i]!, current[i]!, i);
              if ('problem' in c) {
                unusable.push(c.problem);
                out[i] = current[i]!;
              } else out[i] = c.item;
            }
          return out;
        };
        const done = p.onList!(ctx);
        return isThenable(done) ? done.then(left) : left();
      });
      if (!r.ok) continue; // a failing plugin changes nothing, not even what it flagged before failing
      for (const problem of unusable) this.fail({ plugin: p.name, hook: 'onList', message: `left an item that cannot go downstream, which goes on as it was given: ${problem}`, server: server.id });
      for (const [i, f] of flags) {
        const list = out.flags.get(i) ?? [];
        list.push({ ...f, plugin: p.name });
        out.flags.set(i, list);
      }
      for (const [i, reason] of hidden) if (!out.hidden.has(i)) out.hidden.set(i, `plugin ${p.name}: ${reason}`);
      if (r.value) current = r.value;
    }
    out.items = current;
    return out;
  }

  private logOf(p: Plugin): Logger {
    let l = this.logs.get(p.name);
    if (!l) this.logs.set(p.name, (l = this.log.child({ plugin: p.name })));
    return l;
  }

  /**
   * The beforeCall hooks, in order. Each is handed its own copy of the arguments, never the
   * client's object (its digest is in the ledger's row and binds an idempotency key or MRTR
   * state), and what it leaves is taken as JSON inside its guard: a rewrite in place counts like
   * a returned one, a value that is not JSON fails the hook, and no plugin keeps a reference to
   * the arguments that are checked and forwarded. With no beforeCall hook nothing is copied and
   * `plan.arguments` is the client's object; otherwise it is always a copy, which the caller
   * holds to the tool's inputSchema again.
   */
  beforeCall(tool: CallTool, principal: string, group: string | undefined, args: Record<string, unknown>): CallPlan | Promise<CallPlan> {
    if (!this.loaded) return this.ready.then(() => this.beforeCall(tool, principal, group, args));
    // Without a beforeCall hook (the usual hub: redact-secrets has only afterCall) the plan is
    // given at once, so the call it gates waits no turn for it.
    if (!this.hasBeforeCall) return { arguments: args, plugins: this.plugins };
    return this.beforeCallHooks(tool, principal, group, args);
  }

  private async beforeCallHooks(tool: CallTool, principal: string, group: string | undefined, args: Record<string, unknown>): Promise<CallPlan> {
    const plugins = this.plugins;
    const plan: CallPlan = { arguments: args, plugins };
    // The arguments so far, as JSON: each hook gets its own copy, so one that fails leaves no
    // trace. The client's came in as JSON (no deeper than MAX_MESSAGE_DEPTH): they stringify.
    let current = JSON.stringify(args);
    for (const p of plugins) {
      if (!p.beforeCall) continue;
      const given = JSON.parse(current) as Record<string, unknown>;
      const ctx = new HookContext(tool, principal, group, given, this.logOf(p), plan, p.name);
      const r = await this.guard(p, 'beforeCall', { server: tool.server.id, tool: tool.hubName, group }, () => {
        const out = p.beforeCall!(ctx);
        return isThenable(out) ? out.then((v) => beforeOutcome(v, given)) : beforeOutcome(out, given);
      });
      if (!r.ok) continue; // no effect, not even what it changed in place (that was its copy)
      if ('deny' in r.value) {
        plan.deny = { plugin: p.name, reason: r.value.deny };
        return plan;
      }
      current = r.value.arguments;
    }
    plan.arguments = JSON.parse(current) as Record<string, unknown>;
    return plan;
  }

  /**
   * The afterCall hooks, in order. An operator's plugin is handed a copy of the result, so what
   * it changes in place has no effect (only a returned replacement does); a replacement is
   * checked inside the hook's guard (a getter that throws is the hook's failure) and taken as a
   * JSON copy, which no plugin holds. The hub's own plugins (HUB_PLUGINS: redact-secrets, on
   * every call) get the result as it is, with no copy.
   */
  afterCall(tool: CallTool, principal: string, group: string | undefined, plan: CallPlan, result: Record<string, unknown>): Record<string, unknown> | Promise<Record<string, unknown>> {
    if (!this.loaded) return this.ready.then(() => this.afterCall(tool, principal, group, plan, result));
    return this.afterCallFrom(plan.plugins ?? this.plugins, 0, tool, principal, group, plan, result);
  }

  /**
   * The afterCall hooks from the i-th on. Hooks that return at once (redact-secrets') are run
   * in this turn and their result given at once; from the first that returns a promise on, the
   * rest run when it settles.
   */
  private afterCallFrom(
    plugins: readonly Plugin[],
    from: number,
    tool: CallTool,
    principal: string,
    group: string | undefined,
    plan: CallPlan,
    result: Record<string, unknown>,
  ): Record<string, unknown> | Promise<Record<string, unknown>> {
    let current = result;
    for (let i = from; i < plugins.length; i++) {
      const p = plugins[i]!;
      if (!p.afterCall) continue;
      const ctx = new HookContext(tool, principal, group, plan.arguments, this.logOf(p), plan, p.name);
      const own = HUB_PLUGINS.has(p);
      const given = current;
      const where = { server: tool.server.id, tool: tool.hubName, group };
      const r = this.guard(p, 'afterCall', where, () => {
        // A result came in as JSON (no deeper than MAX_MESSAGE_DEPTH): it can be copied.
        const out = p.afterCall!(ctx, own ? given : structuredClone(given));
        return isThenable(out) ? out.then((v) => afterOutcome(v, own)) : afterOutcome(out, own);
      });
      const next = i + 1;
      // Failed, or nothing returned: no change.
      if (isThenable(r)) return r.then((g) => this.afterCallFrom(plugins, next, tool, principal, group, plan, !g.ok || g.value === undefined ? given : g.value));
      if (r.ok && r.value !== undefined) current = r.value;
    }
    return current;
  }

  /** False when a plugin dropped the notification. */
  async notification(server: PluginServer, method: string, params: Record<string, unknown>): Promise<boolean> {
    if (this.loaded && !this.plugins.some((p) => p.onNotification)) return true;
    await this.ready;
    for (const p of this.plugins) {
      if (!p.onNotification) continue;
      // The upstream's own params, which the hub acts on after the hooks (the URI it tells
      // subscribers of): an operator's plugin gets a copy, so what it changes there, failing or
      // not, changes nothing. They came in as JSON: they can be copied.
      const given = HUB_PLUGINS.has(p) ? params : structuredClone(params);
      const r = await this.guard(p, 'onNotification', { server: server.id }, () =>
        p.onNotification!({ server, method, params: given, log: this.logOf(p) }),
      );
      if (r.ok && r.value && (r.value as { drop?: unknown }).drop === true) return false;
    }
    return true;
  }

  /**
   * The plugins of a reloaded config: calls and lists go on with the running ones while these
   * load, then the new ones take over and the old ones are closed. A call already past its
   * beforeCall hooks finishes with the plugins that ran them (CallPlan.plugins).
   */
  replace(next: Promise<Plugin[]> | Plugin[]): Promise<void> {
    // Two reloads in a row take effect in their order, however long each set takes to load.
    this.replacing = this.replacing.then(async () => {
      let ps: Plugin[];
      try {
        ps = await next;
      } catch (err) {
        this.fail({ plugin: '(loader)', hook: 'load', message: messageOf(err) });
        return;
      }
      // A plugin in both sets is one object serving on (a module whose default export is a
      // plugin object, not a factory, is the same object while its file is unchanged): only
      // the plugins that are not carried over are closed. Stopped meanwhile: the new ones
      // never served, and nothing else would close them (those close() closed excepted).
      const old = this.closed ? ps : this.plugins;
      const keep = new Set(this.closed ? this.plugins : ps);
      if (!this.closed) this.use(ps);
      for (const p of old) if (p.close && !keep.has(p)) await this.guard(p, 'close', {}, () => p.close!());
    });
    return this.replacing;
  }

  async close(): Promise<void> {
    await this.ready;
    this.closed = true;
    for (const p of this.plugins) if (p.close) await this.guard(p, 'close', {}, () => p.close!());
  }
}

/** A copy of what a hook left, as JSON (what JSON cannot hold, a BigInt or a cycle, throws). */
const jsonCopy = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/**
 * What a beforeCall hook's answer means, worked out inside its guard (a getter of the answer
 * that throws is the hook's failure): a deny, or the arguments to go on with as a JSON copy —
 * the ones it returned, or else its own copy as it left it. A `deny` that is there but is not
 * text (`true`, `{reason}`) still denies, with a reason saying so: a deny never turns into an
 * allow. Only `undefined`, `null` and `false` are no deny. An `arguments` that is there but
 * is not an object fails the hook, as an answer that is neither nothing (undefined, null,
 * false) nor an object does.
 */
function beforeOutcome(v: unknown, given: Record<string, unknown>): { deny: string } | { arguments: string } {
  // A hook that returns its reason bare (`return 'not on Fridays'`) meant a deny: silently let
  // through, the call ran with nothing said. Not guessed at either: the hook failed, reported.
  if (v !== undefined && v !== null && v !== false && !isObj(v)) throw new Error(`returned ${Array.isArray(v) ? 'an array' : typeof v === 'string' ? 'text' : `a ${typeof v}`}, not {deny} or {arguments}`);
  if (isObj(v)) {
    const deny = v.deny;
    if (typeof deny === 'string') return { deny };
    if (deny !== undefined && deny !== null && deny !== false)
      return { deny: `(no reason given: its "deny" was ${deny === true ? 'true' : Array.isArray(deny) ? 'an array' : typeof deny === 'object' ? 'an object' : `a ${typeof deny}`}, not text)` };
    const args = v.arguments;
    if (args !== undefined) {
      if (!isObj(args)) throw new Error('returned "arguments" that is not an object');
      return { arguments: argumentsCopy(args) };
    }
  }
  return { arguments: argumentsCopy(given) };
}

/** Arguments a hook left, as JSON text (throws for what JSON cannot hold: a BigInt, a cycle). */
function argumentsCopy(v: Record<string, unknown>): string {
  const text = JSON.stringify(v);
  if (text === undefined || !text.startsWith('{')) throw new Error('left arguments that are not a JSON object');
  return text;
}

/**
 * What an afterCall hook's answer means, worked out inside its guard: undefined to keep the
 * result, else the replacement (a JSON copy, unless the hub's own plugin made it). One that
 * cannot stand in for the result fails the hook, and the result it was given goes on.
 */
function afterOutcome(v: unknown, own: boolean): Record<string, unknown> | undefined {
  if (v === undefined || v === null) return undefined;
  const problem = callResultProblem(v);
  if (problem) throw new Error(`returned ${problem}; the result it was given is kept`);
  return own ? (v as Record<string, unknown>) : jsonCopy(v as Record<string, unknown>);
}

/**
 * Why what an afterCall hook returned cannot stand in for a tool's result, or undefined when
 * it can. A bad one would reach the client (or break serialising it, the call then failing
 * after the ledger said ok), so it is refused like a hook that threw. A hook may not turn a
 * final result into an `input_required` one either: the client's retry would run the tool again.
 */
export function callResultProblem(v: unknown): string | undefined {
  if (typeof v !== 'object' || Array.isArray(v) || v === null) return 'something that is not an object';
  const r = v as Record<string, unknown>;
  if (r.resultType !== undefined && r.resultType !== 'complete') return `resultType ${JSON.stringify(String(r.resultType))}, which only the upstream may give`;
  if (!Array.isArray(r.content)) return 'a result without a "content" array';
  if (!r.content.every((c) => c !== null && typeof c === 'object' && typeof (c as { type?: unknown }).type === 'string')) return 'a content item without a "type"';
  if (r.isError !== undefined && typeof r.isError !== 'boolean') return '"isError" that is not a boolean';
  try {
    JSON.stringify(v);
  } catch (err) {
    return `a result that is not JSON (${messageOf(err)})`;
  }
  return undefined;
}
