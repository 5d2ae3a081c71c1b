import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { PluginsConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import descriptionChecks from '../../plugins/description-checks.js';
import redactSecrets from '../../plugins/redact-secrets.js';
import { HUB_PLUGINS, type PluginFailure } from './runner.js';
import type { Plugin, PluginModule } from './types.js';

/** The bundled plugins, in the order they run (before any user plugin). */
export const BUNDLED: Record<string, PluginModule> = {
  'description-checks': descriptionChecks,
  'redact-secrets': redactSecrets,
};

const LOADABLE = new Set(['.js', '.mjs', '.cjs']);
/**
 * How long a plugin may take to load (its import and its factory). One that never finishes
 * would otherwise hold every list and call, and the hub's stop, behind it.
 */
export const PLUGIN_LOAD_TIMEOUT_MS = 10_000;

/**
 * `work` or, once `ms` have passed, a rejection saying so. What `work` gives later goes to
 * `late` (a plugin a factory made after it was given up on is closed there); a late failure is
 * nobody's to hear.
 */
function within<T>(work: Promise<T>, ms: number, late?: (v: T) => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let timedOut = false;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true;
      reject(new Error(`it did not finish loading within ${ms} ms`));
    }, ms);
    timer.unref();
  });
  work.then((v) => {
    if (timedOut) late?.(v);
  }, () => undefined);
  return Promise.race([work, expired]).finally(() => clearTimeout(timer));
}

async function instantiate(mod: PluginModule, options: Record<string, unknown>, log: Logger, fallbackName: string): Promise<Plugin> {
  const made = typeof mod === 'function';
  const p = made ? await mod({ options, log: log.child({ plugin: fallbackName }) }) : mod;
  // Say what was there: "does not export a plugin" for a factory that returned nothing sent the
  // author looking at the module's exports, which were fine.
  if (p === null || typeof p !== 'object') throw new Error(`${made ? 'the factory returned' : 'the module exports'} ${describeValue(p)}, not a plugin (an object with a name and hooks, or a factory returning one)`);
  const problem =
    typeof p.name !== 'string' || p.name === ''
      ? 'the plugin has no name'
      : (['onList', 'beforeCall', 'afterCall', 'onNotification', 'close'] as const).filter((h) => p[h] !== undefined && typeof p[h] !== 'function').map((h) => `${h} is not a function`)[0];
  if (problem) {
    // Refused, it is never used: a factory's plugin is closed, undoing what the factory started.
    if (typeof mod === 'function' && typeof p.close === 'function') closeUnused(p, fallbackName, log);
    throw new Error(problem);
  }
  return p;
}

/** A value that is not a plugin, named for an error message (never its contents: options may be in it). */
function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'nothing';
  return `a ${typeof v}`;
}

/**
 * Closes a plugin a factory made that the hub will not use (refused, a duplicate, or made after
 * its load was given up on), within the load time limit; a failure is logged.
 */
function closeUnused(p: Plugin, name: string, log: Logger, ms = PLUGIN_LOAD_TIMEOUT_MS): Promise<void> {
  return within(Promise.resolve().then(() => p.close?.()), ms).then(
    () => undefined,
    (err: unknown) => log.warn({ plugin: name, err: err instanceof Error ? err.message : String(err) }, 'a plugin the hub does not use failed to close'),
  );
}

/**
 * The name a plugin file goes by before it is loaded: the file name without extension and
 * ordering prefix ("10-audit.mjs" → "audit"); its options and `disable` use it.
 */
function nameOfFile(where: string): string {
  return where.replace(/^.*[\\/]/, '').replace(/\.[cm]?js$/, '').replace(/^\d+[-_]/, '').replace(/^bundled:/, '');
}

/** What a plugin file holds, as a short digest; "missing" when it cannot be read. */
function digestOf(file: string): string {
  try {
    return createHash('sha256').update(readFileSync(file)).digest('hex').slice(0, 16);
  } catch {
    return 'missing';
  }
}

const requireCache = createRequire(import.meta.url).cache;

/** The file each user plugin was loaded from: a reload that cannot load it again keeps this one. */
const FILE_OF = new WeakMap<Plugin, string>();

/**
 * Node keeps an imported module for the life of the process, keyed by its URL. A plugin is
 * imported under a URL that names what its file holds (`?plugin-version=<digest>`): a file
 * edited since is imported afresh on a reload, an unchanged one is the module already loaded,
 * and a failed import is tried again only once the file holds something else. Each version
 * stays in memory; a plugin under edit costs one module per version.
 */
async function importPlugin(file: string): Promise<PluginModule> {
  // A CommonJS plugin is kept by file name, whatever the URL: a new version must be read again.
  // (A URL imported before is answered from the module map without looking here.)
  delete requireCache[file];
  const m = (await import(`${pathToFileURL(file).href}?plugin-version=${digestOf(file)}`)) as { default?: PluginModule; plugin?: PluginModule };
  const mod = m.default ?? m.plugin;
  // A default export of `null` is there: "no default export" sent its author looking for a missing one.
  if (mod === undefined) throw new Error(m.default === null ? 'the module exports null, not a plugin (an object with a name and hooks, or a factory returning one)' : 'no default export (and no export named "plugin")');
  return mod;
}

/**
 * A load's error as its message, a syntax error's named so: Node's message for a plugin file that
 * does not parse is a bare "Unexpected token ';'", which read as though the plugin's code had
 * thrown it. (A `JSON.parse` in the plugin's code throws a SyntaxError too, hence no more than the name.)
 */
function messageOf(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  return err instanceof SyntaxError ? `SyntaxError: ${err.message}` : err.message;
}

/** The plugins folder: `plugins.dir`, or `plugins`, next to the config file. */
function folderOf(config: PluginsConfig | undefined, configFile: string | undefined): string {
  return resolve(configFile ? dirname(configFile) : process.cwd(), config?.dir ?? 'plugins');
}

function isFolder(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory();
}

/** The operator's plugin files a `plugins` section names, in load order: the folder's, then `paths`. */
function userPluginFiles(config: PluginsConfig | undefined, configFile: string | undefined): { file: string; options?: Record<string, unknown> }[] {
  const base = configFile ? dirname(configFile) : process.cwd();
  const out: { file: string; options?: Record<string, unknown> }[] = [];
  const dir = folderOf(config, configFile);
  if (isFolder(dir)) for (const f of readdirSync(dir).sort()) if (LOADABLE.has(extname(f))) out.push({ file: join(dir, f) });
  for (const entry of config?.paths ?? []) {
    const rel = typeof entry === 'string' ? entry : entry.path;
    out.push({ file: isAbsolute(rel) ? rel : resolve(base, rel), options: typeof entry === 'string' ? undefined : entry.options });
  }
  return out;
}

/**
 * Which plugin files a `plugins` section loads and what they hold: a reload compares it with the
 * one taken at the last load, so a plugin file edited, added or removed is loaded afresh even
 * when the section itself is unchanged.
 */
export function pluginSources(config: PluginsConfig | undefined, configFile: string | undefined): string {
  const files = userPluginFiles(config, configFile).map(({ file }) => `${file}\t${digestOf(file)}`);
  // A folder the config names that is missing is reported by each load: made since, even empty, it is news.
  if (config?.dir !== undefined) files.unshift(`${folderOf(config, configFile)}\t${isFolder(folderOf(config, configFile)) ? 'folder' : 'missing'}`);
  return files.join('\n');
}

/**
 * Loads the plugins in order: bundled, the plugins folder, then `plugins.paths`. A plugin that
 * cannot be loaded is reported and skipped; the hub starts without it.
 */
export async function loadPlugins(
  config: PluginsConfig | undefined,
  configFile: string | undefined,
  log: Logger,
  onFailure: (f: PluginFailure) => void,
  loadTimeoutMs = PLUGIN_LOAD_TIMEOUT_MS,
  /** The plugins running now (a reload's): one whose file no longer loads runs on in its place. */
  previous: readonly Plugin[] = [],
): Promise<Plugin[]> {
  const disabled = new Set(config?.disable ?? []);
  // Own keys only: a plugin named `__proto__` got Object.prototype as its options (what it wrote
  // there, every object of the hub had), one named `constructor` Object itself.
  const optionsOf = (name: string): Record<string, unknown> => (config?.options && Object.hasOwn(config.options, name) ? config.options[name] : undefined) ?? {};
  const out: Plugin[] = [];
  const add = async (where: string, load: () => Promise<PluginModule>, options?: Record<string, unknown>, hub = false) => {
    try {
      let made = false;
      const p = await within(
        (async () => {
          const mod = await load();
          // A factory learns its name only when called: its options are looked up by the file's
          // name without extension and ordering prefix ("10-audit.mjs" → "audit").
          const guess = nameOfFile(where);
          made = typeof mod === 'function';
          return instantiate(mod, options ?? optionsOf(made ? guess : (mod as Plugin).name), log, guess);
        })(),
        loadTimeoutMs,
        // Skipped as too slow, then finished: nothing will use it, and a factory's plugin may
        // have started something (a timer, a connection) only its close hook stops.
        (late) => {
          if (!made) return;
          log.warn({ plugin: late.name, from: where }, 'a plugin finished loading after it was skipped as too slow; closing it');
          void closeUnused(late, late.name, log, loadTimeoutMs);
        },
      );
      if (disabled.has(p.name)) {
        // Known by this name only once loaded; a factory was called, so its close hook undoes
        // whatever it started.
        log.info({ plugin: p.name }, 'plugin disabled by config');
        if (made) await closeUnused(p, p.name, log, loadTimeoutMs);
        return;
      }
      if (out.some((q) => q.name === p.name)) {
        if (made) await closeUnused(p, p.name, log, loadTimeoutMs);
        throw new Error(`a plugin named "${p.name}" is already loaded`);
      }
      if (hub) HUB_PLUGINS.add(p);
      else FILE_OF.set(p, where);
      out.push(p);
      log.info({ plugin: p.name, from: where }, 'plugin loaded');
    } catch (err) {
      // An edit that broke a running plugin (a typo, a bad export) left the hub without it until
      // fixed: a plugin that denied calls stopped denying them. The version loaded before runs on.
      const kept = hub || digestOf(where) === 'missing' ? undefined : previous.find((q) => FILE_OF.get(q) === where);
      const keep = kept !== undefined && !disabled.has(kept.name) && !out.some((q) => q.name === kept.name);
      const f: PluginFailure = { plugin: where, hook: 'load', message: messageOf(err) + (keep ? '; the version loaded before runs on' : '') };
      log.error(f, keep ? 'plugin could not be loaded again; the version loaded before runs on' : 'plugin could not be loaded; the hub runs without it');
      onFailure(f);
      if (keep) out.push(kept);
    }
  };
  for (const [name, mod] of Object.entries(BUNDLED)) {
    if (disabled.has(name)) continue;
    await add(`bundled:${name}`, async () => mod, optionsOf(name), true);
  }
  // The default folder may well be absent; one the config names is meant to be there. A typo
  // in it loaded nothing, said nothing (no log line, `reload` exit 0), and left the hub without
  // the plugins the operator counted on, a plugin that denies calls among them.
  const named = config?.dir === undefined ? undefined : folderOf(config, configFile);
  if (named !== undefined && !isFolder(named)) {
    const f: PluginFailure = { plugin: named, hook: 'load', message: `plugins.dir ${existsSync(named) ? 'is not a folder' : 'does not exist'}` };
    log.error(f, 'plugin could not be loaded; the hub runs without it');
    onFailure(f);
  }
  for (const { file, options } of userPluginFiles(config, configFile)) {
    // Disabled by its file's name: not imported at all, so none of its code runs.
    if (disabled.has(nameOfFile(file))) {
      log.info({ plugin: nameOfFile(file), from: file }, 'plugin disabled by config');
      continue;
    }
    await add(file, () => importPlugin(file), options);
  }
  return out;
}
