import type { Argv, CommandModule } from 'yargs';
import { commandNeeded } from './command-needed.js';
import { fail, say } from './said.js';
import { addApiKey, listApiKeys, removeApiKeys } from '../auth/key-file.js';
import { missingConfigHint, NO_CONFIG } from './config-problems.js';
import { counted } from '../counted.js';
import { UsageError } from './usage-error.js';

interface KeyArgs {
  config: string;
  principal?: string;
  scope?: string[];
  group?: string[];
}

const configOption = { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' } as const;


function problem(e: unknown, file: string): string {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'ENOENT' ? `${NO_CONFIG}; ${missingConfigHint(file)}` : code ? `cannot use the file (${code})` : (e as Error).message;
}

const addCommand: CommandModule<object, KeyArgs> = {
  command: 'add <principal>',
  describe: 'Make a new API key for PRINCIPAL: prints it once and stores only its SHA-256 in the config',
  builder: (y: Argv) =>
    y
      .positional('principal', { type: 'string', describe: 'Who holds the key (as the ledger names them)' })
      .option('config', configOption)
      // requiresArg: given no value (a script's unset variable, or the last word), yargs read an
      // empty list, and the key was made for every group (or without the scope) meant.
      .option('scope', { type: 'string', array: true, requiresArg: true, describe: 'A scope the key grants (repeatable)' })
      .option('group', {
        type: 'string',
        array: true,
        requiresArg: true,
        describe: 'A tool group whose endpoint /mcp/<group> the key may use; given, the key may use only those (repeatable)',
      })
      .check((a) => {
        if ((a.scope as string[] | undefined)?.includes('')) throw new UsageError('--scope is empty: give a scope, or leave the option out (an unset variable in a script?)');
        // Written into the config, it would be refused there (RFC 6749 scope-token): said here, the config untouched.
        const odd = (a.scope as string[] | undefined)?.find((s) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s));
        if (odd !== undefined) throw new UsageError(`--scope ${JSON.stringify(odd)} is not one scope (visible ASCII without spaces, quotes or backslashes): give each scope with a --scope of its own`);
        return true;
      }) as Argv<KeyArgs>,
  handler: (args) => {
    let key: string;
    try {
      key = addApiKey(args.config, String(args.principal), args.scope, args.group);
    } catch (e) {
      return fail('keys add', `${args.config}: ${problem(e, args.config)}`);
    }
    process.stdout.write(`${key}\n`);
    say('keys add', `API key for ${args.principal} added to ${args.config}. It is shown only this once. A running hub takes it on its next reload (at once when it watches the config), or on a restart if it ran without authentication.`);
  },
};

const removeCommand: CommandModule<object, KeyArgs> = {
  command: 'remove <principal>',
  describe: 'Remove every API key of PRINCIPAL from the config',
  builder: (y: Argv) => y.positional('principal', { type: 'string' }).option('config', configOption) as Argv<KeyArgs>,
  handler: (args) => {
    // "no API key of  in …" (exit 1) said nothing of the empty name (a script's unset variable).
    if (args.principal === '') return fail('keys remove', 'the principal is empty: give one as `switchyard keys list` shows it (an unset variable in a script?)');
    try {
      const n = removeApiKeys(args.config, String(args.principal));
      if (n === 0) return fail('keys remove', `no API key of ${args.principal} in ${args.config}`, 1);
      process.stdout.write(`removed ${counted(n, 'key')} of ${args.principal}\n`);
    } catch (e) {
      fail('keys remove', `${args.config}: ${problem(e, args.config)}`);
    }
  },
};

const listCommand: CommandModule<object, KeyArgs> = {
  command: 'list',
  describe: 'List the principals holding API keys (with the start of each hash, never a key)',
  builder: (y: Argv) => y.option('config', configOption) as Argv<KeyArgs>,
  handler: (args) => {
    try {
      const keys = listApiKeys(args.config);
      // Nothing at all on a first run read as a command that did nothing: say so, as `ledger query` does.
      // Prefixed as every command's notes are (`switchyard ledger query: note: …`): stderr of several commands in one log says whose it is.
      if (keys.length === 0) say('keys list', `note: no API keys in ${args.config} (\`switchyard keys add PRINCIPAL\` makes one)`);
      for (const k of keys)
        process.stdout.write(`${k.principal}\t${k.hashPrefix}…${k.scopes.length ? `\t${k.scopes.join(' ')}` : ''}${k.groups.length ? `\tgroups: ${k.groups.join(' ')}` : ''}\n`);
    } catch (e) {
      fail('keys list', `${args.config}: ${problem(e, args.config)}`);
    }
  },
};

export const keysCommand: CommandModule = {
  command: 'keys',
  describe: 'Manage API keys of downstream clients',
  builder: (y: Argv) => y.command(addCommand).command(removeCommand).command(listCommand).check(commandNeeded(2, 'Give a keys subcommand; see --help.')),
  handler: () => {},
};
