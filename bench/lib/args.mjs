// The `--name value` options of the bench's small scripts (bench/run.mjs, with many more, uses
// node:util's parseArgs). A number option given something that is not a number stops the
// script with a message: a NaN would otherwise run a benchmark of nothing and print it.

/** The value after `--name`, or `dflt` when the flag is absent or last. */
export function option(name, dflt, argv = process.argv.slice(2)) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : dflt;
}

/** `option` as a finite number; anything else is an error naming the flag. */
export function numberOption(name, dflt, argv = process.argv.slice(2)) {
  const raw = option(name, undefined, argv);
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isFinite(n)) throw new UsageError(`--${name} takes a number, not "${raw}"`);
  return n;
}

export class UsageError extends Error {
  name = 'UsageError';
}
