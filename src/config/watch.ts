/**
 * Reloading the config of a running hub: on SIGHUP (the caller wires it to `reloadNow`) and
 * when the file changes. The folder is watched rather than the file, because editors save by
 * writing a new file and renaming it over the old one (and, for a file reached through a
 * symlink, the folder of the file it points to as well); events are debounced, and a save that
 * leaves the text as last applied does nothing. A config that does not load is rejected with one
 * log line per problem and the running config is kept. Reloads never overlap.
 */
import { lstatSync, readFileSync, readlinkSync, watch, type FSWatcher } from 'node:fs';
import { join, parse, resolve, sep } from 'node:path';
import type { Logger } from '../log.js';
import { ConfigError, loadConfig } from './load.js';
import { UNSET_VARIABLE } from './interpolate.js';
import type { HubConfig } from './types.js';

/** How a reload ended; `R` is what applying a config reports. */
export type ReloadOutcome<R> =
  | { status: 'applied'; report: R }
  /** The file changed on disk but holds the same text (a save without edits). */
  | { status: 'unchanged' }
  /** The file does not load: the running config is kept. */
  | { status: 'rejected'; problems: string[] }
  /** The config loaded but could not be applied (or the hub is stopping): the running config is kept. */
  | { status: 'failed'; error: string };

export interface ConfigWatcher<R = void> {
  /**
   * Read the file and apply it now (SIGHUP, `switchyard reload`). Resolves when done, with how
   * the last reload it waited for ended (a request made while one runs is served by a run
   * after it); never rejects.
   */
  reloadNow(reason: string): Promise<ReloadOutcome<R>>;
  close(): void;
}

export interface WatchOptions {
  debounceMs?: number;
  /** Watch the file for changes (default true); SIGHUP works either way. */
  watchFile?: boolean;
  /**
   * The file's text when the running config was read (configText, just before loading it):
   * the watch starts later, after the hub's start, and an edit made meanwhile must not pass
   * for applied. Default: the text when the watch starts.
   */
  loadedText?: string;
}

/** The config file's text, or undefined when it cannot be read. */
export function configText(file: string): string | undefined {
  return readText(resolve(file));
}

/**
 * A reload reads `${env:…}` from the hub's environment, fixed when it started: a variable the
 * operator exported since in a shell (where `switchyard reload` runs, and finds it set) is not
 * in it, so "is not set" alone reads as wrong. Said where it is looked for.
 */
function inHubEnvironment(problem: string): string {
  return UNSET_VARIABLE.test(problem) ? `${problem} in the hub's environment (as it was when the hub started; one set since in a shell reaches it only at a restart)` : problem;
}

/** Links followed at most, as the system's own limit (ELOOP) is about. */
const MAX_LINKS = 40;

/**
 * The folders whose entries decide what `file` reads, each with those entries' names: every
 * symlink on the way (in the file's path or a link's target) in the real folder it is in, and
 * the file itself in the folder it resolves to. A name not there (a file deleted, a folder
 * missing) is watched for in the last folder reached.
 */
function entriesOnTheWay(file: string): Map<string, Set<string>> {
  const wanted = new Map<string, Set<string>>();
  const add = (dir: string, name: string) => {
    const names = wanted.get(dir) ?? new Set<string>();
    names.add(name);
    wanted.set(dir, names);
  };
  let p = file;
  for (let links = 0; links <= MAX_LINKS; links++) {
    const parts = p.split(sep).filter((x) => x !== '');
    // Built from entries that are no links, from the root: a real folder all along.
    let dir = parse(p).root;
    let next: string | undefined;
    for (const [i, name] of parts.entries()) {
      const at = join(dir, name);
      let link: boolean;
      try {
        link = lstatSync(at).isSymbolicLink();
      } catch {
        add(dir, name);
        return wanted;
      }
      if (link || i === parts.length - 1) add(dir, name);
      if (link) {
        try {
          next = resolve(dir, readlinkSync(at), ...parts.slice(i + 1));
        } catch {
          return wanted;
        }
        break;
      }
      dir = at;
    }
    if (next === undefined) return wanted;
    p = next;
  }
  return wanted;
}

function readText(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

export function watchConfig<R>(file: string, log: Logger, apply: (c: HubConfig) => Promise<R>, opts: WatchOptions = {}): ConfigWatcher<R> {
  const path = resolve(file);
  const debounceMs = opts.debounceMs ?? 250;
  let lastText = 'loadedText' in opts ? opts.loadedText : readText(path);
  // The file's last text was refused (rejected, or its apply failed): the last log line about it
  // says so, and a return to the running text must be said too.
  let refused = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<ReloadOutcome<R>> | undefined;
  let again: string | undefined;
  let closed = false;

  const once = async (reason: string): Promise<ReloadOutcome<R>> => {
    const text = readText(path);
    if (reason === 'file changed' && text === lastText) {
      if (refused) log.info({ file: path, reason }, 'config file is back to the running config; nothing to reload');
      refused = false;
      return { status: 'unchanged' };
    }
    let next: HubConfig;
    try {
      next = loadConfig(path);
    } catch (err) {
      const problems = (err instanceof ConfigError ? err.problems : [(err as Error).message]).map(inHubEnvironment);
      log.error({ file: path, reason, problems }, `config reload rejected; the running config is kept: ${problems.join('; ')}`);
      refused = true;
      return { status: 'rejected', problems };
    }
    try {
      const report = await apply(next);
      // Only now: a text whose apply failed must not pass for applied, so that saving it again
      // (once what failed is fixed) retries it.
      lastText = text;
      refused = false;
      return { status: 'applied', report };
    } catch (err) {
      log.error({ file: path, reason, err: (err as Error).message }, 'config reload failed; the running config is kept');
      refused = true;
      return { status: 'failed', error: (err as Error).message };
    }
  };

  const stopping: ReloadOutcome<R> = { status: 'failed', error: 'the hub is stopping' };
  const reloadNow = (reason: string): Promise<ReloadOutcome<R>> => {
    if (closed) return Promise.resolve(stopping);
    if (running) {
      // A request (SIGHUP, `switchyard reload`) applies the file whatever its text, which picks up
      // edited plugin files: a file event coming after it must not turn it into a text compare.
      if (again === undefined || reason !== 'file changed') again = reason;
      return running;
    }
    running = (async () => {
      let r: string | undefined = reason;
      let last: ReloadOutcome<R> = stopping;
      while (r !== undefined && !closed) {
        again = undefined;
        last = await once(r);
        r = again;
      }
      return last;
    })().finally(() => (running = undefined));
    return running;
  };

  // The folders watched (each for the names in it that lead to the file), by folder.
  const watchers = new Map<string, { names: Set<string>; watcher: FSWatcher }>();
  const changed = () => {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      if (closed) return;
      // A symlink's target may have moved (a Kubernetes ConfigMap swaps the folder it points to).
      arm();
      void reloadNow('file changed');
    }, debounceMs);
    timer.unref();
  };
  /**
   * Watches the file's folder for its name and, when it is reached through symlinks (a config
   * kept in a dotfiles repository, a mounted ConfigMap, a deploy's `current` link), each link's
   * folder for the link's name and the folder of the file it resolves to: an edit or a swap
   * there changes nothing in the first folder. Called again after each change, so a link
   * pointed elsewhere is followed.
   */
  const arm = (): void => {
    const wanted = entriesOnTheWay(path);
    for (const [dir, w] of watchers) {
      if (wanted.has(dir)) continue;
      w.watcher.close();
      watchers.delete(dir);
    }
    for (const [dir, names] of wanted) {
      const had = watchers.get(dir);
      if (had) {
        had.names = names;
        continue;
      }
      try {
        const entry = { names, watcher: watch(dir, { persistent: false }, (_event, name) => (name === null || entry.names.has(name)) && changed()) };
        entry.watcher.on('error', (err) => log.warn({ err: err.message, file: path, folder: dir }, 'config file watch stopped; SIGHUP still reloads'));
        watchers.set(dir, entry);
      } catch (err) {
        log.warn({ err: (err as Error).message, file: path, folder: dir }, 'cannot watch the config file; SIGHUP still reloads');
      }
    }
  };
  if (opts.watchFile !== false) {
    arm();
    // Edited while the hub started (after its config was read, before this watch): applied now.
    if (watchers.size > 0 && readText(path) !== lastText) changed();
  }

  return {
    reloadNow,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      for (const w of watchers.values()) w.watcher.close();
      watchers.clear();
    },
  };
}
