/**
 * Options whose value may be written in quotes that are part of it: `--request-id` (yargs takes
 * `--requestId` too) takes a request id's JSON form (`'"1"'` the string "1", `1` the number;
 * src/ledger/request-id.ts).
 */
const QUOTES_KEPT = ['--request-id', '--requestId'];

/**
 * The command line with `--request-id="1"` given as `--request-id '"1"'`: yargs strips the
 * quotes around a value written after `=` (not one written as the next word), so the string
 * "1" was taken for the number 1, its rows listed as if they were the string's, nothing said.
 * Only a value that starts with a quote is split off, so a value starting with a dash keeps
 * the `=` that tells yargs it is the value.
 */
export function keepQuotedValues(args: readonly string[]): string[] {
  const end = args.indexOf('--');
  return args.flatMap((arg, i) => {
    if (end >= 0 && i > end) return [arg]; // after `--`: a positional word, as it is
    const eq = arg.indexOf('=');
    if (eq < 0 || !QUOTES_KEPT.includes(arg.slice(0, eq))) return [arg];
    const value = arg.slice(eq + 1);
    return value.startsWith('"') || value.startsWith("'") ? [arg.slice(0, eq), value] : [arg];
  });
}
