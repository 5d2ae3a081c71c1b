/**
 * The CLI's commands, each loaded when it runs. Each command's module brings what it runs with
 * it (`start` the whole hub): loading every one took ~0.7 s of CPU at every `switchyard servers`.
 */
import type { CommandModule } from 'yargs';

type Command = CommandModule<any, any>;

/** In the order the help lists them. */
export const COMMANDS: Record<string, () => Promise<Command>> = {
  start: async () => (await import('./start.js')).startCommand,
  config: async () => (await import('./config.js')).configCommand,
  ledger: async () => (await import('./ledger.js')).ledgerCommand,
  keys: async () => (await import('./keys.js')).keysCommand,
  stdio: async () => (await import('./stdio.js')).stdioCommand,
  connect: async () => (await import('./connect.js')).connectCommand,
  init: async () => (await import('./init.js')).initCommand,
  servers: async () => (await import('./servers.js')).serversCommand,
  reload: async () => (await import('./reload.js')).reloadCommand,
  doctor: async () => (await import('./doctor.js')).doctorCommand,
  tools: async () => (await import('./tools.js')).toolsCommand,
  login: async () => (await import('./login.js')).loginCommand,
  logout: async () => (await import('./login.js')).logoutCommand,
};

/**
 * The commands to load: only the one named first, when it is one (the common case); every one
 * otherwise (no command, --help, a typo, an option before the command), so that the help and
 * the usage errors are exactly those of the whole CLI.
 */
export function commandsToLoad(args: readonly string[]): string[] {
  const first = args[0];
  return first !== undefined && Object.hasOwn(COMMANDS, first) ? [first] : Object.keys(COMMANDS);
}

