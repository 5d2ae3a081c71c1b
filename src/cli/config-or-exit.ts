import { ConfigError, loadConfig } from '../config/load.js';
import type { HubConfig } from '../config/types.js';
import { configProblemLines } from './config-problems.js';

/** The config for a command that cannot run without one: each problem on its own line, exit 2. */
export function loadConfigOrExit(file: string): HubConfig {
  try {
    return loadConfig(file);
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const p of configProblemLines(err, file)) process.stderr.write(`${file}: ${p}\n`);
      process.exit(2);
    }
    throw err;
  }
}
