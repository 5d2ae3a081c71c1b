import type { ConfigError } from '../config/load.js';
import { shellArg } from '../shell-arg.js';

/**
 * The lines to print for an unusable config. A file that is not there is most often a first run
 * (or a command run from another folder than the config's), so that line says what to run next.
 */
export function configProblemLines(err: ConfigError, file: string): string[] {
  if (!err.missing) return err.problems;
  const hint = missingConfigHint(file);
  return err.problems.map((p) => `${p}: no such file; ${hint}`);
}

/** What to run when the config `file` is not there. */
export function missingConfigHint(file: string): string {
  return file === 'hub.config.json'
    ? "`switchyard init` writes a starter config here (--from FILE imports an IDE's servers), or give the path of yours with --config"
    : `\`switchyard init --config ${shellArg(file)}\` writes a starter config there (--from FILE imports an IDE's servers)`;
}
