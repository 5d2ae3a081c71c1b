/**
 * yargs' own parse errors (an unknown command or option, a missing argument, a value not among
 * an option's choices) in one line, as the CLI's other usage errors are said: yargs printed the
 * whole help of the command (up to 40 lines) before its one line, which the user had to find at
 * the bottom, and that line named `--bogus` as "bogus" and a mistyped command as an "argument".
 */

/**
 * A usage error a command finds itself: `--url` that is no http(s) URL, a `--config` that is not
 * there, an option value out of its range (`start --port`, `servers restart --timeout`), an
 * option given twice or empty. The command says so in one line (exit 2), as yargs' own are.
 */
export class UsageError extends Error {}

/** What the failing command is, as yargs knew it when it failed. */
export interface FailedCommand {
  /** The commands as typed, parent first (`['ledger', 'query']`); empty at the top. */
  commands: readonly string[];
  /** The failing command's usage (`login <server>`): names the positionals it needs. */
  usage: string | undefined;
  /** Whether the failing command has subcommands (a word it does not know is then a command). */
  hasSubcommands: boolean;
}

const camel = (key: string) => key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

/**
 * How an option yargs names without its dashes (`bogus`, `x`, and `bogusThing` beside
 * `bogus-thing`) was typed: `--bogus`, `-x`; undefined for a word, which is no option.
 */
function typedOption(name: string, typed: readonly string[]): string | undefined {
  const end = typed.indexOf('--');
  for (const arg of end < 0 ? typed : typed.slice(0, end)) {
    if (arg.startsWith('--')) {
      const key = arg.slice(2).split('=')[0]!;
      const bare = key.startsWith('no-') ? key.slice(3) : key;
      if ([key, bare].some((k) => k === name || camel(k) === name)) return `--${key}`;
    } else if (arg.startsWith('-') && name.length === 1 && arg.slice(1).split('=')[0]!.includes(name)) return `-${name}`;
  }
  return undefined;
}

/** `--x` for an option's key as yargs names it (`-x` for a letter). */
const dashed = (key: string) => (key.length === 1 ? `-${key}` : `--${key}`);

/** yargs' message (`Unknown arguments: x, y`) said plainly, or as it is when it is none of those known. */
function plainly(message: string, typed: readonly string[], failed: FailedCommand): string {
  const unknown = /^Unknown arguments?: (.*)$/s.exec(message);
  if (unknown) {
    const names = unknown[1]!.split(', ');
    const options = [...new Set(names.map((n) => typedOption(n, typed)).filter((o) => o !== undefined))];
    const words = names.filter((n) => typedOption(n, typed) === undefined);
    const said: string[] = [];
    if (options.length) said.push(`unknown option${options.length > 1 ? 's' : ''} ${options.join(', ')}`);
    if (words.length) {
      const what = failed.hasSubcommands ? 'command' : 'argument';
      said.push(`unknown ${what}${words.length > 1 ? 's' : ''} ${words.map((w) => JSON.stringify(w)).join(', ')}`);
    }
    return said.join('; ');
  }
  const positionals = /^Not enough non-option arguments: got (\d+), need at least (\d+)$/.exec(message);
  if (positionals) {
    const needed = [...(failed.usage ?? '').matchAll(/<[^>]+>/g)].map((m) => m[0]).slice(Number(positionals[1]));
    if (needed.length) return `missing ${needed.join(' ')}`;
  }
  const following = /^Not enough arguments following: (.+)$/.exec(message);
  if (following) return `${dashed(following[1]!)} needs a value after it`;
  const required = /^Missing required arguments?: (.+)$/.exec(message);
  if (required) return `${required[1]!.split(', ').map(dashed).join(', ')} must be given`;
  if (message.startsWith('Invalid values:')) {
    const lines = [...message.matchAll(/Argument: (.+?), Given: (.+?), Choices: (.+)/g)];
    if (lines.length) return lines.map(([, key, given, choices]) => `${dashed(key!)} must be one of ${choices}; got ${given}`).join('; ');
  }
  return message.replace(/\s*\n\s*/g, ' ');
}

/** The line for a parse error: the command's, naming the problem and where its usage is told. */
export function usageErrorLine(message: string, typed: readonly string[], failed: FailedCommand): string {
  const who = ['switchyard', ...failed.commands].join(' ');
  return `${who}: ${plainly(message, typed, failed)} (see ${who} --help)\n`;
}
