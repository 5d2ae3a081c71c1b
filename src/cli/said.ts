/**
 * A command's own lines on stderr, each said as the command's (`switchyard keys add: …`,
 * `switchyard login: warning: …`): in a log of several commands (an IDE's, a script's) a bare
 * line does not say whose it is.
 */
export function say(command: string, line: string): void {
  process.stderr.write(`switchyard ${command}: ${line}\n`);
}

/** A command's refusal: its line (say) and its exit code, 2 (usage, config) unless given. */
export function fail(command: string, message: string, code = 2): void {
  say(command, message);
  process.exitCode = code;
}
