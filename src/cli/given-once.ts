/**
 * One rule for every command: an option that takes one value, given twice, is a usage error
 * (exit 2). yargs hands such an option over as an array, which the commands read as one value:
 * `-c a.json -c b.json` failed deep in Node ("paths[0] argument must be of type string", exit 1)
 * and `start --port A --port B` blamed a value no one typed. Options declared `array` (repeatable,
 * as `keys add --scope`) are left alone.
 */
import type { Options } from 'yargs';
import { UsageError } from './usage-error.js';

/** The options as yargs describes them to a check: which take arrays, and each one's aliases. */
type Described = { array: string[]; alias: Record<string, string[]> };

/** How the option is spelt on the command line: its own name, not a camelCase copy or a short alias. */
function optionName(key: string, described: Described): string {
  const primary = Object.keys(described.alias).find((p) => p === key || described.alias[p]!.includes(key)) ?? key;
  return primary.length === 1 ? `-${primary}` : `--${primary}`;
}

/** A yargs check (global): throws (one line, exit 2) naming the first option given more than once. */
export function givenOnce(argv: Record<string, unknown>, options: Options | Described): true {
  const described = options as Described;
  const repeatable = new Set(described.array ?? []);
  for (const [key, value] of Object.entries(argv)) {
    if (key === '_' || key === '$0' || !Array.isArray(value) || repeatable.has(key)) continue;
    throw new UsageError(`${optionName(key, described)} is given twice: give it once`);
  }
  return true;
}

/**
 * A yargs check: each of `options` (name, what to give instead) given as the empty string (a
 * script's unset variable) is a usage error (exit 2), one line naming it. Read as not given, it
 * meant something else than the user's: `ledger verify --db ''` verified the config's live
 * ledger instead of the evidence copy meant, `servers -c ''` asked the default address, and
 * `tools --server ''` listed every server's tools.
 */
export function notEmpty(options: readonly (readonly [name: string, give: string])[]): (argv: Record<string, unknown>) => true {
  return (argv) => {
    for (const [key, give] of options) if (argv[key] === '') throw new UsageError(`--${key} is empty: ${give}`);
    return true;
  };
}

/**
 * Global: the options naming a file, read from a path, and `start --host` (notEmpty). Read as not
 * given, `init --from ''` wrote a starter config with no servers instead of importing the file
 * meant; `start --host ''` is no address at all (node binds every interface for it).
 */
export const noEmptyPath = notEmpty([
  ['config', "give the file's path (an unset variable in a script?)"],
  ['db', "give the file's path (an unset variable in a script?)"],
  ['from', "give the client config's path (an unset variable in a script?)"],
  ['host', 'give an address such as 127.0.0.1, or leave the option out (an unset variable in a script?)'],
]);

/** yargs' view of the options, as a check is given it: which take numbers and texts, their defaults, which require a value. */
type Typed = Described & { number?: string[]; string?: string[]; default?: Record<string, unknown>; narg?: Record<string, unknown> };

/**
 * Each option on the command line as typed (`--limit`, `-c`, `--port=`), with the word that is
 * its value: after `=`, else the next word (undefined when there is none). Only before `--`.
 * `raw` is the command line as given: yargs' parsed argv no longer tells '' from 0, nor a
 * value left out from the default.
 */
function* typedOptions(raw: readonly string[]): Generator<{ name: string; value: string | undefined }> {
  const end = raw.indexOf('--') < 0 ? raw.length : raw.indexOf('--');
  for (let i = 0; i < end; i++) {
    const m = /^--?([^-=][^=]*)(?:=([\s\S]*))?$/.exec(raw[i]!);
    if (m) yield { name: m[1]!, value: m[2] ?? (i + 1 < end ? raw[i + 1] : undefined) };
  }
}

/** Whether `name` as typed is one of `keys` (yargs lists an option under its name and aliases; `--ledgerWaitMs` as its kebab-case name). */
function isOf(keys: Set<string>, name: string): boolean {
  return keys.has(name) || keys.has(name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`));
}

/**
 * Nothing after the option, or another option (`ledger query --limit --json`): yargs read it as
 * not given, and the command ran with the default. A negative number (`tail -n -1`) and `-` are
 * values: yargs takes them as such.
 */
function valueLeftOut(value: string | undefined): boolean {
  return value === undefined || (value.startsWith('-') && value !== '-' && Number.isNaN(Number(value)));
}

/**
 * A yargs check (global): an option that takes a number, given as the empty string (a script's
 * unset variable: `start --port "$PORT"`), is a usage error (exit 2), one line naming it. yargs
 * reads '' as 0, which meant something no one asked for: `start --port ''` listened on a random
 * free port, `stdio --ledger-wait-ms ''` waited for nobody, `ledger tail -n ''` showed no rows.
 * Given with no value at all (the last word, or another option next) is one too: yargs took it
 * as not given, so `ledger query --limit --json` listed the default 50 rows.
 */
export function noEmptyNumber(raw: readonly string[]): (argv: Record<string, unknown>, options: Options | Described) => true {
  return (_argv, options) => {
    const described = options as Typed;
    const numbers = new Set(described.number ?? []);
    for (const { name, value } of typedOptions(raw)) {
      if (!isOf(numbers, name)) continue;
      if (value === '') throw new UsageError(`${optionName(name, described)} is empty: give a number, or leave the option out (an unset variable in a script?)`);
      if (valueLeftOut(value)) throw new UsageError(`${optionName(name, described)} needs a number after it: give one, or leave the option out`);
    }
    return true;
  };
}

/**
 * A yargs check (global): an option that takes a text and has a default (`--config`, whose
 * default is hub.config.json), given with no value after it (the last word, or another option
 * next), is a usage error (exit 2), one line naming it. yargs took it as not given and ran with
 * the default without a word: `keys list -c` listed the keys of ./hub.config.json whatever file
 * was meant, `servers -c --json` asked that config's daemon. A text option without a default
 * reads as '' there, refused where that names nothing (notEmpty); one that requires its value
 * (requiresArg: `ledger export --format`) is yargs' own usage error already.
 */
export function noMissingText(raw: readonly string[]): (argv: Record<string, unknown>, options: Options | Described) => true {
  return (_argv, options) => {
    const described = options as Typed;
    const texts = new Set(described.string ?? []);
    for (const { name, value } of typedOptions(raw)) {
      if (!isOf(texts, name) || !valueLeftOut(value)) continue;
      // The defaults and the value requirement are listed under the option's own name.
      const own = optionName(name, described).replace(/^--?/, '');
      const fallback = described.default?.[own];
      if (typeof fallback !== 'string' || Object.hasOwn(described.narg ?? {}, own)) continue;
      throw new UsageError(`${optionName(name, described)} needs a value after it: give one, or leave the option out for the default, ${fallback}`);
    }
    return true;
  };
}
