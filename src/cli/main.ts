#!/usr/bin/env node
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMMAND_LINES, COMMANDS, commandsToLoad, onlyOptions } from './commands.js';
import { packageRoot } from '../paths.js';
import { givenOnce, noEmptyNumber, noEmptyPath, noMissingText } from './given-once.js';
import { keepQuotedValues } from './quoted-values.js';
import { commandNeeded, NoCommandGiven } from './command-needed.js';
import { endQuietlyWhenReaderGoes } from './broken-pipe.js';
import { UsageError, usageErrorLine, type FailedCommand } from './usage-error.js';

/**
 * The command as typed (`ledger keys`, `servers restart`), once yargs has found it: an error of
 * one line is said as that command's, as its other errors are (`switchyard connect: --key is
 * empty…`). Empty before then, and for options alone (`switchyard --config ''`).
 */
let command: string[] = [];
const said = (message: string): string => `${['switchyard', ...command].join(' ')}: ${message}\n`;

/** A command that failed in a way it did not handle: one line, exit 1 (SWITCHYARD_DEBUG=1 keeps the stack). */
function unhandled(err: Error): never {
  process.stderr.write(said(process.env.SWITCHYARD_DEBUG ? (err.stack ?? err.message) : err.message));
  process.exit(1);
}

// Read by every command's logger: a level pino does not know would fail each of them with
// pino's own words ("default level:… must be included in custom levels").
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
// Set but empty (`SWITCHYARD_LOG_LEVEL= switchyard …`, a script's blank default) is unset: the
// default level, not a usage error.
if (process.env.SWITCHYARD_LOG_LEVEL === '') delete process.env.SWITCHYARD_LOG_LEVEL;
const level = process.env.SWITCHYARD_LOG_LEVEL;
if (level !== undefined && !LEVELS.includes(level)) {
  process.stderr.write(`switchyard: SWITCHYARD_LOG_LEVEL must be one of ${LEVELS.join(', ')}; it is ${JSON.stringify(level.slice(0, 40))}\n`);
  process.exit(2);
}

/** The `switchyard` CLI: one module per command, each thin over the library. */
// The arguments after node and the script (yargs' hideBin, without loading yargs for it).
const argv = keepQuotedValues(process.argv.slice(2));
// Scripts and editors ask for the version often: it needs neither yargs nor any command (yargs
// prints the version of the package.json above the CLI, this one, the same way).
if (argv.length === 1 && argv[0] === '--version') {
  process.stdout.write(`${(JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8')) as { version: string }).version}\n`);
  process.exit(0);
}
// yargs reads the working folder as it is made, before any command can say what went wrong:
// in a folder removed meanwhile (the shell's, after `rm -rf` of it) every command was a stack.
try {
  process.cwd();
} catch {
  process.stderr.write('switchyard: the current folder no longer exists (it was removed or moved): cd to one that does, and give paths from there\n');
  process.exit(1);
}
const { default: yargs } = await import('yargs');
// `<command>`: one is needed (commandNeeded below), as yargs' demandCommand would have said it.
const cli = yargs(argv).scriptName('switchyard').usage('$0 <command>');
if (onlyOptions(argv)) for (const [command, describe] of Object.values(COMMAND_LINES)) cli.command(command, describe);
else for (const name of commandsToLoad(argv)) cli.command(await COMMANDS[name]!());
// The words after `--` end `_` (no command takes them).
const afterDashes = argv.includes('--') ? argv.length - argv.indexOf('--') - 1 : 0;
cli
  .middleware((parsed) => {
    // Strict mode leaves no other stray words in `_`: only the commands, parent first.
    command = parsed._.slice(0, parsed._.length - afterDashes).map(String);
    // Before any handler writes: `| head` ends a command quietly (broken-pipe.ts).
    endQuietlyWhenReaderGoes(command[0]);
  })
  .strict()
  // Before any command reads an option given twice as if it were one value.
  .check(givenOnce)
  .check(noEmptyPath)
  .check(noEmptyNumber(argv))
  .check(noMissingText(argv))
  .check(commandNeeded(1, 'Give a command; see --help.'))
  .help()
  .fail((msg, err, y) => {
    // A usage error a command found (a bad --url, an option out of range): one line, not the help and a stack.
    if (err instanceof UsageError) {
      process.stderr.write(said(err.message));
      process.exit(2);
    }
    // yargs' own parse errors (YError: `--since` with no value, "Not enough arguments following")
    // are usage errors too, not failures (exit 1).
    if (err && !(err instanceof NoCommandGiven) && err.name !== 'YError') unhandled(err);
    // No (sub)command given at all (`switchyard`, `switchyard ledger`): the help says which there are.
    if (err instanceof NoCommandGiven) {
      y.showHelp();
      process.stderr.write(`\n${msg}\n`);
      process.exit(2);
    }
    // A usage error of yargs' own (README: exit 2): one line naming it, not the help before it.
    process.stderr.write(usageErrorLine(msg, argv, failedCommand(y as unknown as { getCommands(): unknown[] })));
    process.exit(2);
  });

/**
 * The command yargs was parsing when it failed. Its parse errors come before any middleware
 * runs (`command` above is still empty): only yargs' context (not in its typings) knows the
 * command then. Without it (another yargs), the error is said as the CLI's.
 */
function failedCommand(usage: { getCommands(): unknown[] }): FailedCommand {
  const internal = cli as unknown as { getInternalMethods?: () => { getContext(): { commands?: string[]; fullCommands?: string[] } } };
  const context = internal.getInternalMethods?.().getContext();
  return {
    commands: context?.commands ?? [],
    usage: context?.fullCommands?.at(-1),
    hasSubcommands: usage.getCommands().length > 0,
  };
}

try {
  // A handler's synchronous throw comes out of parseAsync() itself, not as a rejection.
  await cli.parseAsync();
} catch (err) {
  unhandled(err instanceof Error ? err : new Error(String(err)));
}
