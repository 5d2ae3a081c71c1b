/**
 * `switchyard login <id>` and `switchyard logout <id>`: a user's authorization-code login to one
 * HTTP upstream whose `oauth.grant` is "authorization_code" (src/upstream/oauth-login.ts), and
 * its removal. The authorization URL goes to stderr; a browser is opened only when asked
 * (`--open`, the platform's opener; `--opener CMD`, a command run with the URL in
 * $SWITCHYARD_LOGIN_URL). After a login a running daemon is asked to restart the server so
 * that it uses the new tokens at once (a ready one would pick them up on its next request anyway).
 * A logout revokes the tokens at the authorization server where it offers revocation (RFC 7009,
 * unless --no-revoke), removes them, and keeps a client the login registered (the next login is
 * that client again, not one more registration at the authorization server) unless --forget-client.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import type { HubConfig, ServerConfig } from '../config/types.js';
import { screenText } from '../ledger/format.js';
import { restartAnswer } from './admin-answers.js';
import { postJson } from './admin-request.js';
import { loadConfigOrExit } from './config-or-exit.js';
import { configuredServer } from '../config/load.js';
import { NoDaemonError, daemonBase, movedTo, takeDaemonNotes } from './daemon-client.js';
import { UsageError } from './usage-error.js';
import { notEmpty } from './given-once.js';
import { fail, say } from './said.js';
import { oauthTokenFile } from '../paths.js';

interface LoginArgs {
  server: string;
  config: string;
  url?: string;
  open: boolean;
  opener?: string;
  timeout: number;
  scope?: string[];
}

interface LogoutArgs {
  server: string;
  config: string;
  forgetClient: boolean;
  revoke: boolean;
}

/** The server to log in to or out of, or why it cannot be (said, exit 2). */
function authCodeServer(config: HubConfig, id: string, file: string, command: 'login' | 'logout'): ServerConfig | undefined {
  const s = configuredServer(config, id);
  if (s === undefined) {
    fail(command, `${file}: no server "${id}" (servers: ${Object.keys(config.servers).join(', ') || 'none'})`);
    return undefined;
  }
  if (s.url === undefined || s.oauth?.grant !== 'authorization_code' || s.oauthTokenFile === undefined) {
    fail(command, `${file}: servers.${id} is not an HTTP server with oauth.grant "authorization_code"; a login is for those only`);
    return undefined;
  }
  return s;
}

/** A line of the login's progress (oauth-login.ts's `say`) on stderr, said as the command's. */
const sayLogin = (line: string): void => say('login', line);

/** The platform's way to open a URL in the user's browser. */
function platformOpener(): { cmd: string; args: string[] } {
  if (process.platform === 'darwin') return { cmd: 'open', args: [] };
  // Not `cmd /c start`: cmd would take the URL's `&` for its own command separator.
  if (process.platform === 'win32') return { cmd: 'rundll32', args: ['url.dll,FileProtocolHandler'] };
  return { cmd: 'xdg-open', args: [] };
}

/** Runs the opener; its failure is said, not fatal (the URL is on stderr for the user to open). */
function runOpener(url: string, opener: string | undefined): Promise<void> {
  return new Promise((resolve) => {
    const child =
      opener !== undefined
        ? spawn(opener, { shell: true, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, SWITCHYARD_LOGIN_URL: url } })
        : (() => {
            const p = platformOpener();
            return spawn(p.cmd, [...p.args, url], { stdio: 'ignore', detached: process.platform !== 'win32' });
          })();
    child.once('error', (err) => {
      sayLogin(`warning: could not open a browser (${err.message}); open the URL above yourself`);
      resolve();
    });
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
  });
}

const loginCommand: CommandModule<object, LoginArgs> = {
  command: 'login <server>',
  describe: 'Log the hub in to an HTTP server with oauth.grant "authorization_code" (a browser, PKCE); the tokens are stored for the daemon',
  builder: (y: Argv) =>
    y
      .positional('server', { type: 'string', demandOption: true, describe: 'The server id' })
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' })
      .option('open', { type: 'boolean', default: false, describe: "Open the authorization URL in the platform's browser" })
      .option('opener', { type: 'string', describe: 'A shell command that opens the authorization URL, given in $SWITCHYARD_LOGIN_URL (implies --open)' })
      .option('timeout', { type: 'number', default: 300, describe: 'Seconds to wait for the authorization' })
      .option('scope', {
        type: 'string',
        array: true,
        // Given no value, yargs read an empty list: asked for nothing more, without a word.
        requiresArg: true,
        describe: 'More scopes to ask for (space-separated, or the option repeated), kept with those of the login stored now: what a server that answers 403 insufficient_scope wants',
      })
      .option('url', { type: 'string', describe: 'A running daemon to tell of the new login, e.g. http://127.0.0.1:7410 (default: from the config)' })
      .check((a) => {
        if (!(typeof a.timeout === 'number' && a.timeout > 0)) throw new UsageError('--timeout must be a number of seconds above 0');
        return true;
      })
      // `--opener "$OPENER"` unset (or --opener with nothing after it) ran an empty shell command:
      // no browser, no word, and the login waited for the user until --timeout.
      .check(notEmpty([['opener', "give a command that opens $SWITCHYARD_LOGIN_URL, or --open for the platform's browser (an unset variable in a script?)"]])) as unknown as Argv<LoginArgs>,
  handler: async (argv) => {
    const config = loadConfigOrExit(argv.config, 'login');
    const s = authCodeServer(config, argv.server, argv.config, 'login');
    if (!s) return;
    const { login } = await import('../upstream/oauth-login.js');
    let result;
    try {
      result = await login({
        serverId: s.id,
        serverUrl: s.url!,
        oauth: s.oauth!,
        headers: s.headers,
        tokenFile: s.oauthTokenFile!,
        timeoutMs: argv.timeout * 1000,
        moreScopes: (argv.scope ?? []).flatMap((x) => String(x).split(' ')).filter((x) => x.length > 0),
        say: sayLogin,
        open: async (url) => {
          // The URL alone on its line, indented, to be copied whole.
          sayLogin(`open this URL to authorize switchyard for "${s.id}":\n\n  ${url}\n`);
          if (argv.open || argv.opener !== undefined) await runOpener(url, argv.opener);
          sayLogin('waiting for the authorization…');
        },
      });
    } catch (err) {
      // The message carries the authorization server's own words (error, error_description): no terminal control through them.
      return fail('login', `login to "${s.id}" failed: ${screenText((err as Error).message.replace(/^OAuth: /, ''))}`, 1);
    }
    const t = result.tokens;
    const life = t.expiresAt === undefined ? 'no expiry given' : `expires in ${Math.round((t.expiresAt - Date.now()) / 1000)} s`;
    sayLogin(
      `logged in to "${s.id}": tokens stored in ${s.oauthTokenFile} (${life}${t.refreshToken ? ', refreshable' : ', no refresh token'}${t.scopes.length ? `; scopes ${screenText(t.scopes.join(' '))}` : ''})`,
    );
    await tellDaemon(argv, s.id);
  },
};

/** A running daemon restarts the server, which then starts with the new tokens; no daemon, nothing to do. */
async function tellDaemon(argv: LoginArgs, id: string): Promise<void> {
  let base: string;
  try {
    base = daemonBase(argv.url, argv.config);
  } catch {
    return;
  }
  try {
    await postJson(base, `/admin/servers/${encodeURIComponent(id)}/restart`, restartAnswer, { timeoutMs: 5_000 });
    sayLogin(`the daemon at ${movedTo(base) ?? base} restarted "${id}" with the new login`);
    for (const note of takeDaemonNotes()) sayLogin(`note: ${note}`);
  } catch (err) {
    if (err instanceof NoDaemonError) return;
    // Every such error names the daemon's address already (a refusal, no answer, another program there).
    sayLogin(`the daemon was not told of the new login: ${(err as Error).message}; it uses the login at its next attempt, or run \`switchyard servers restart ${id}\``);
  }
}

const logoutCommand: CommandModule<object, LogoutArgs> = {
  command: 'logout <server>',
  describe:
    "Revoke (where the authorization server offers it) and remove the tokens `switchyard login` stored for a server (the daemon's next request needs a new login); a client the login registered is kept for the next login unless --forget-client",
  builder: (y: Argv) =>
    y
      .positional('server', { type: 'string', demandOption: true, describe: 'The server id' })
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' })
      .option('forget-client', {
        type: 'boolean',
        default: false,
        describe: 'Forget the dynamically registered client too (the next login registers a new one)',
      })
      .option('revoke', {
        type: 'boolean',
        default: true,
        describe: "Revoke the tokens at the authorization server's revocation endpoint first (RFC 7009); --no-revoke only removes them here",
      }) as unknown as Argv<LogoutArgs>,
  handler: async (argv) => {
    const config = loadConfigOrExit(argv.config, 'logout');
    const s = configuredServer(config, argv.server);
    const loginServer = s?.url !== undefined && s.oauth?.grant === 'authorization_code' && s.oauthTokenFile !== undefined;
    // A server that no longer logs in (its oauth.grant changed, its url gone, the server removed)
    // may have a login stored from before: its refresh token stays valid for months, and the
    // logout is what revokes and removes it. Where the login would be, as the config derives it.
    const file = loginServer ? s.oauthTokenFile! : oauthTokenFile(config.ledger.path, config.file !== undefined ? dirname(config.file) : process.cwd(), argv.server);
    const { clientFileOf } = await import('../upstream/oauth-token-store.js');
    if (!loginServer) {
      if (!existsSync(file) && !existsSync(clientFileOf(file))) return void authCodeServer(config, argv.server, argv.config, 'logout');
      say('logout', `${argv.config}: ${s === undefined ? `no server "${argv.server}"` : `servers.${argv.server} no longer logs in (no oauth.grant "authorization_code")`}; logging out of the login stored for it before`);
    }
    const { logout } = await import('./logout.js');
    process.exitCode = await logout({
      id: argv.server,
      file,
      ...(loginServer ? { serverUrl: s.url, oauth: s.oauth } : { oauth: s?.oauth }),
      revoke: argv.revoke,
      forgetClient: argv.forgetClient,
      say: (line) => say('logout', line),
    });
  },
};

export { loginCommand, logoutCommand };
