/**
 * Reloading the config of a running hub: on SIGHUP (the caller wires it to `reloadNow`) and
 * when the file changes. The folder is watched rather than the file, because editors save by
 * writing a new file and renaming it over the old one; events are debounced, and a save that
 * leaves the text unchanged does nothing. A config that does not load is rejected with one
 * log line per problem and the running config is kept. Reloads never overlap.
 */
import { watch, readFileSync, type FSWatcher } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import type { Logger } from '../log.js';
import { ConfigError, loadConfig } from './load.js';
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
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<ReloadOutcome<R>> | undefined;
  let again: string | undefined;
  let closed = false;

  const once = async (reason: string): Promise<ReloadOutcome<R>> => {
    const text = readText(path);
    if (reason === 'file changed' && text === lastText) return { status: 'unchanged' };
    let next: HubConfig;
    try {
      next = loadConfig(path);
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [(err as Error).message];
      log.error({ file: path, reason, problems }, `config reload rejected; the running config is kept: ${problems.join('; ')}`);
      return { status: 'rejected', problems };
    }
    lastText = text;
    try {
      return { status: 'applied', report: await apply(next) };
    } catch (err) {
      log.error({ file: path, reason, err: (err as Error).message }, 'config reload failed; the running config is kept');
      return { status: 'failed', error: (err as Error).message };
    }
  };

  const stopping: ReloadOutcome<R> = { status: 'failed', error: 'the hub is stopping' };
  const reloadNow = (reason: string): Promise<ReloadOutcome<R>> => {
    if (closed) return Promise.resolve(stopping);
    if (running) {
      again = reason;
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

  let watcher: FSWatcher | undefined;
  if (opts.watchFile !== false) {
    try {
      watcher = watch(dirname(path), { persistent: false }, (_event, name) => {
        if (name !== null && name !== basename(path)) return;
        if (timer) clearTimeout(timer);
        timer = setTimeout(() => void reloadNow('file changed'), debounceMs);
        timer.unref();
      });
      watcher.on('error', (err) => log.warn({ err: err.message, file: path }, 'config file watch stopped; SIGHUP still reloads'));
      // Edited while the hub started (after its config was read, before this watch): applied now.
      if (readText(path) !== lastText) {
        timer = setTimeout(() => void reloadNow('file changed'), debounceMs);
        timer.unref();
      }
    } catch (err) {
      log.warn({ err: (err as Error).message, file: path }, 'cannot watch the config file; SIGHUP still reloads');
    }
  }

  return {
    reloadNow,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      watcher?.close();
    },
  };
}
