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
 * Each command's usage line and description, as its module gives them (a test checks): enough
 * for the CLI's own help and usage errors, which then load no command module at all.
 */
export const COMMAND_LINES: Record<string, [command: string, describe: string]> = {
  start: ['start', 'Run the hub: Streamable HTTP at POST /mcp (both protocol eras)'],
  config: ['config', 'Work with the hub configuration'],
  ledger: ['ledger', 'Read the audit ledger: query, tail, stats, verify, export, keys, prune'],
  keys: ['keys', 'Manage API keys of downstream clients'],
  stdio: ['stdio', 'Serve the hub over stdin/stdout (both protocol eras), for clients that spawn a command'],
  connect: ['connect', 'Bridge stdin/stdout to a running hub over HTTP, so IDEs that spawn commands share one daemon'],
  init: [
    'init',
    'Write a starter hub.config.json; --from imports the servers of a Claude Desktop, VS Code, Cursor, Claude Code, Cline, Roo Code or Windsurf config',
  ],
  servers: ['servers', "The running daemon's upstreams: state, era, server version, tools, restarts, last error"],
  reload: ['reload', 'Make the running daemon read its config file again and apply it (as SIGHUP does), and say what changed'],
  doctor: [
    'doctor',
    'Check the config, the daemon, its port, the upstreams, tool names, quarantine, client tool caps, upstream logins and the ledger',
  ],
  tools: ['tools', 'The tools the running hub exposes and holds back (--kind prompt|resource|template: those instead): names, servers, eras, trust, hints, pins, flags'],
  login: [
    'login <server>',
    'Log the hub in to an HTTP server with oauth.grant "authorization_code" (a browser, PKCE); the tokens are stored for the daemon',
  ],
  logout: [
    'logout <server>',
    'Revoke (where the authorization server offers it) and remove the tokens `switchyard login` stored for a server (the daemon\'s next request needs a new login); a client the login registered is kept for the next login unless --forget-client',
  ],
};

/**
 * Whether the arguments name no command at all (only options: --help, --version, a mistake):
 * then no command can run, and their lines (COMMAND_LINES) give the whole CLI's help and errors.
 */
export function onlyOptions(args: readonly string[]): boolean {
  return args.every((a) => a.startsWith('-'));
}

/**
 * The commands to load: only the one named first, when it is one (the common case); every one
 * otherwise (no command, --help, a typo, an option before the command), so that the help and
 * the usage errors are exactly those of the whole CLI.
 */
export function commandsToLoad(args: readonly string[]): string[] {
  const first = args[0];
  return first !== undefined && Object.hasOwn(COMMANDS, first) ? [first] : Object.keys(COMMANDS);
}

