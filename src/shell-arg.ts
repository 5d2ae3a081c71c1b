/** A word as a POSIX shell reads it back unchanged: as it is when plain, else in single quotes. */
export function shellArg(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}
