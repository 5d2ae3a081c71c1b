/**
 * The plugins the hub runs: loaded at its start, loaded again by a reload whose `plugins`
 * section or plugin files changed, and what of each load could not be loaded (a reload's report
 * names them until a load succeeds). Their hooks run in the PluginRunner this makes.
 */
import type { Logger } from '../log.js';
import type { HubConfig } from '../config/types.js';
import { loadPlugins, pluginSources } from '../plugins/loader.js';
import { PluginRunner, type PluginFailure } from '../plugins/runner.js';

export class PluginLoads {
  readonly runner: PluginRunner;
  /** The plugin files of the last load and what they held (a reload loads them again when this differs). */
  private sourcesLoaded: string;
  /** Plugins of the last load (at the start or a reload) that could not be loaded ("<file>: <why>"). */
  private failedLoads: string[] = [];

  /** `failed`: a plugin that failed, to load or in a hook (already logged by the runner or the loader). */
  constructor(
    private readonly config: HubConfig,
    private readonly log: Logger,
    private readonly failed: (f: PluginFailure) => void,
  ) {
    this.sourcesLoaded = pluginSources(config.plugins, config.file);
    const notLoaded = (f: PluginFailure) => {
      this.failedLoads.push(`${f.plugin}: ${f.message}`);
      failed(f);
    };
    this.runner = new PluginRunner(loadPlugins(config.plugins, config.file, log, notLoaded), log, failed);
  }

  /** Plugins the hub runs without now because they could not be loaded ("<file>: <why>"). */
  get notLoaded(): readonly string[] {
    return this.failedLoads;
  }

  /** Whether the plugin files `plugins` names were edited, added or removed since the last load. */
  filesChanged(plugins: HubConfig['plugins']): boolean {
    return pluginSources(plugins, this.config.file) !== this.sourcesLoaded;
  }

  /** `plugins` loaded and put in place of the running ones; those that could not be loaded ("<file>: <why>"). */
  async reload(plugins: NonNullable<HubConfig['plugins']>): Promise<string[]> {
    this.sourcesLoaded = pluginSources(plugins, this.config.file);
    const failed: string[] = [];
    await this.runner.replace(
      loadPlugins(plugins, this.config.file, this.log, (f) => {
        failed.push(`${f.plugin}: ${f.message}`);
        this.failed(f);
      }, undefined, this.runner.current),
    );
    this.failedLoads = [...failed];
    return failed;
  }
}
