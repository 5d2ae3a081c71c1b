import { ConfigError, loadConfig } from '../config/load.js';
import type { HubConfig } from '../config/types.js';
import { configErrorText } from './config-problems.js';

/** The config for `command`, which cannot run without one: each problem on its own line (configErrorText), exit 2. */
export function loadConfigOrExit(file: string, command: string): HubConfig {
  try {
    return loadConfig(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(configErrorText(err, file, command));
      process.exit(2);
    }
    throw err;
  }
}
