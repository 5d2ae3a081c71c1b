/**
 * A command (or a subcommand of `ledger`, `keys`, `config`) that must be given: a yargs check
 * rather than yargs' demandCommand. yargs counts the commands before it looks for unknown
 * options, so `switchyard --bogus` (and `ledger --bogus`) was told "Give a command" and never
 * which option it does not know; a check runs after strict mode's, which names the option.
 */
export class NoCommandGiven extends Error {}

/** A yargs check: fewer than `depth` commands given (`switchyard` 1, `switchyard ledger` 2) is a usage error saying `message`. */
export function commandNeeded(depth: number, message: string): (argv: { _: unknown[] }) => true {
  return (argv) => {
    if (argv._.length < depth) throw new NoCommandGiven(message);
    return true;
  };
}
