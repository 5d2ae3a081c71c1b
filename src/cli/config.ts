import type { Argv, CommandModule } from 'yargs';
import { commandNeeded } from './command-needed.js';
import { adminExposureProblem, configExposureProblem } from '../auth/exposure.js';
import { badPortWarnings } from './fetch-bad-ports.js';
import { ConfigError, loadConfig } from '../config/load.js';
import { ignoredSettings } from '../config/ignored-settings.js';
import { configErrorText } from './config-problems.js';
import { dirname } from 'node:path';
import type { HubConfig } from '../config/types.js';
import { redactLogText } from '../policy/secret-text.js';
import { counted } from '../counted.js';

interface ValidateArgs {
  config: string;
}

/**
 * `auth.oauth` as start's listener makes it (Authenticator.prepare): an unreadable `jwksFile`, a
 * plain-http `jwksUri` off loopback, no acceptable algorithm. start refuses those as the config's
 * errors (exit 2); validate passed them. Loaded only for a config with OAuth (jose is large).
 */
export async function oauthProblem(config: HubConfig): Promise<string | undefined> {
  if (!config.auth?.oauth) return undefined;
  const { Authenticator } = await import('../auth/authenticator.js');
  const { createLogger } = await import('../log.js');
  try {
    await new Authenticator(config.auth, config.file ? dirname(config.file) : process.cwd(), createLogger('silent')).prepare();
    return undefined;
  } catch (err) {
    return redactLogText((err as Error).message);
  }
}

const validateCommand: CommandModule<object, ValidateArgs> = {
  command: 'validate',
  describe: 'Check hub.config.json: prints "ok: N servers" or one line per problem',
  builder: (y: Argv) =>
    y.option('config', {
      alias: 'c',
      type: 'string',
      default: 'hub.config.json',
      describe: 'Config file',
    }) as Argv<ValidateArgs>,
  handler: async (args) => {
    try {
      const config = loadConfig(args.config);
      // What start refuses beyond the schema, with the same words: valid only if start takes it.
      const exposed = configExposureProblem(config);
      if (exposed) throw new ConfigError([`listen.host: ${exposed}`]);
      const adminExposed = adminExposureProblem(config);
      if (adminExposed) throw new ConfigError([`listen.admin.host: ${adminExposed}`]);
      const oauth = await oauthProblem(config);
      if (oauth) throw new ConfigError([oauth]);
      process.stdout.write(`ok: ${counted(Object.keys(config.servers).length, 'server')}\n`);
      // Valid, but a setting that does nothing where it stands (a group naming a server that is
      // not configured): said here too, as start's log and doctor say it, exit 0 all the same.
      // Prefixed as every command's notes and warnings are (`switchyard ledger query: note: …`).
      for (const m of [...ignoredSettings(config), ...badPortWarnings(config)]) process.stderr.write(`switchyard config validate: warning: ${m}\n`);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      process.stderr.write(configErrorText(e, args.config, 'config validate'));
      // As `start` and `reload` answer the same file: 2, a config error (README, exit codes).
      process.exitCode = 2;
    }
  },
};

export const configCommand: CommandModule = {
  command: 'config',
  describe: 'Work with the hub configuration',
  builder: (y: Argv) => y.command(validateCommand).check(commandNeeded(2, 'Give a config subcommand; see --help.')),
  handler: () => {},
};
