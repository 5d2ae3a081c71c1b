import type { ConfigError } from '../config/load.js';
import { shellArg } from '../shell-arg.js';

/**
 * The lines to print for an unusable config. A file that is not there is most often a first run
 * (or a command run from another folder than the config's), so that line says what to run next.
 */
export function configProblemLines(err: ConfigError, file: string): string[] {
  if (!err.missing) return err.problems;
  // One line, the file named once (by the caller, before it): it read "FILE: config: cannot read FILE (ENOENT): no such file; …".
  return [`${NO_CONFIG}; ${missingConfigHint(file)}`];
}

/** What every command says of a config file that is not there, after its name. */
export const NO_CONFIG = 'no such config file';

/**
 * The text a command prints for `err`: each problem on a line of its own, said as the command's
 * and naming the file (`switchyard start: hub.config.json: servers.a.command: must be string`),
 * as `servers` and `reload` say a config that is not there: a bare `FILE: problem` did not say
 * whose it was in a log of several commands.
 */
export function configErrorText(err: ConfigError, file: string, command: string): string {
  return configProblemLines(err, file)
    .map((p) => `switchyard ${command}: ${file}: ${p}\n`)
    .join('');
}

/** What to run when the config `file` is not there. */
export function missingConfigHint(file: string): string {
  return file === 'hub.config.json'
    ? "`switchyard init` writes a starter config here (--from FILE imports an IDE's servers), or give the path of yours with --config"
    : `\`switchyard init --config ${shellArg(file)}\` writes a starter config there (--from FILE imports an IDE's servers)`;
}
