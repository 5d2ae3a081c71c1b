import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import { loadConfigOrExit } from './config-or-exit.js';
import { adminExposureProblem, configExposureProblem } from '../auth/exposure.js';
import { configText, watchConfig } from '../config/watch.js';
import { AdminSocketError } from '../downstream/admin-socket.js';
import { Hub } from '../hub.js';
import { consoleToStderr, createLogger, redactLogText } from '../log.js';
import { UsageError } from './usage-error.js';
import { gcAdvice, usableCpus } from './gc-advice.js';
import { LedgerLockError, ledgerTrouble, lockLedger } from './ledger-lock.js';
import { ServeSignals } from './serve-signals.js';
import { daemonRecordFile, writeDaemonRecord } from './daemon-record.js';
import { badPortWarnings } from './fetch-bad-ports.js';
import type { HubConfig } from '../config/types.js';
import type { Logger } from '../log.js';

interface StartArgs {
  config: string;
  host?: string;
  port?: number;
  watch: boolean;
}

export const startCommand: CommandModule<object, StartArgs> = {
  command: 'start',
  describe: 'Run the hub: Streamable HTTP at POST /mcp (both protocol eras)',
  builder: (y: Argv) =>
    y
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' })
      .option('host', { type: 'string', describe: 'Listen address (default from config, 127.0.0.1)' })
      .option('port', { alias: 'p', type: 'number', describe: 'Listen port (default from config, 7410)' })
      .option('watch', { type: 'boolean', default: true, describe: 'Reload the config when the file changes (--no-watch: only SIGHUP or `switchyard reload` do)' })
      .check((a) => {
        if (a.port === undefined || (Number.isInteger(a.port) && a.port >= 0 && a.port <= 65535)) return true;
        // As typed (yargs made "abc" NaN).
        const i = process.argv.findIndex((x) => x === '--port' || x === '-p' || x.startsWith('--port='));
        const typed = i < 0 ? String(a.port) : process.argv[i]!.startsWith('--port=') ? process.argv[i]!.slice(7) : (process.argv[i + 1] ?? '');
        throw new UsageError(`--port must be a whole number from 0 to 65535, got ${JSON.stringify(typed)}`);
      }) as Argv<StartArgs>,
  handler: async (argv) => {
    consoleToStderr(); // before any plugin loads
    const log = createLogger();
    // First: a signal from here on is handled (serve-signals.ts). Nothing is started until the
    // hub exists, so a stop before that is an exit.
    const signals = new ServeSignals(log);
    // Before the load: an edit from here on is applied once the hub serves (watchConfig).
    const loadedText = configText(argv.config);
    const config = loadConfigOrExit(argv.config, 'start');
    const host = argv.host ?? config.listen.host;
    const adminExposed = adminExposureProblem(config);
    // Where the host came from, as config validate names it: the option, or the file and its key
    // (a refusal of a host the operator did not type sent them looking for it).
    const hostExposed = configExposureProblem(config, host);
    const exposed =
      (hostExposed && (argv.host !== undefined ? `--host ${argv.host}: ${hostExposed}` : `${argv.config}: listen.host: ${hostExposed}`)) ??
      (adminExposed && `${argv.config}: listen.admin.host: ${adminExposed}`);
    if (exposed) {
      process.stderr.write(`switchyard start: ${exposed}\n`);
      process.exit(2);
    }
    // The config's own check (listen.admin.port must differ from listen.port) cannot see --port:
    // the two listeners on one port failed later, as if another program held the admin port.
    const admin = config.listen.admin;
    if (argv.port !== undefined && admin && 'port' in admin && admin.port === argv.port) {
      process.stderr.write(`switchyard start: --port ${argv.port} is the port of listen.admin in ${argv.config}: the admin listener is a listener of its own; give another port\n`);
      process.exit(2);
    }
    try {
      await lockLedger(config, 'switchyard start', 3_000, (holder) =>
        log.info({ holder }, `the ledger is in use by pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}: waiting up to 3 s for it`),
      );
    } catch (err) {
      if (!(err instanceof LedgerLockError)) throw err;
      // Said as the command's, as its other refusals are (switchyard start: …).
      process.stderr.write(`switchyard start: ${err.message}\n`);
      process.exit(2);
    }
    let hub: Hub;
    /** A stop signal came while the hub started: it stops there, before it serves or spawns anything. */
    const stopIfAsked = async (): Promise<void> => {
      if (!signals.stopping) return;
      await hub.stop();
      log.info({ signal: signals.stopping }, 'stopped before serving');
      log.flush();
      process.exit(0);
    };
    try {
      hub = Hub.create(config, log);
      // From here a stop waits for the step under way to end: the hub's stop needs it ended.
      signals.onStop((signal) => log.info({ signal }, 'stop signal while starting: the hub stops once the step under way ends'));
      await hub.prepareListener();
    } catch (err) {
      // The disk, not the config: a ledger SQLite cannot write (full, I/O error) is exit 1, named as the ledger.
      const ledger = ledgerTrouble(err, config);
      if (ledger) {
        process.stderr.write(`switchyard start: ${ledger}\n`);
        process.exit(1);
      }
      // A config the schema accepts can still be unusable (an unreadable JWKS file): say why, no stack.
      process.stderr.write(`switchyard start: ${argv.config}: ${redactLogText((err as Error).message)}\n`);
      process.exit(2);
    }
    await stopIfAsked();
    const port = argv.port ?? config.listen.port;
    let addr: AddressInfo;
    try {
      addr = await hub.listen(host, port);
    } catch (err) {
      // A busy port is an operator's everyday mistake: one line, no stack, no usage text.
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'EADDRINUSE' ? 'the address is in use (another hub, or another program)' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
      process.stderr.write(`switchyard start: cannot listen on ${host}:${port}: ${why}\n`);
      await hub.stop();
      process.exit(1);
    }
    // The operator's own listener (listen.admin), before upstreams start, as the main one.
    let adminAt: string | undefined;
    try {
      adminAt = await hub.listenAdmin();
    } catch (err) {
      const a = config.listen.admin!;
      const where = 'path' in a ? a.path : `${a.host ?? '127.0.0.1'}:${a.port}`;
      const code = (err as NodeJS.ErrnoException).code;
      // The socket's own errors say what holds the path (another hub's pid, a file, the lock).
      const why =
        err instanceof AdminSocketError ? err.message : code === 'EADDRINUSE' ? 'the address is in use (another hub, or another program)' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
      process.stderr.write(`switchyard start: cannot listen on ${where} (listen.admin): ${why}\n`);
      await hub.stop();
      process.exit(1);
    }
    await stopIfAsked();
    const recordAt = recordAddress(argv.config, config, addr, adminAt, log);
    const watcher = watchConfig(
      argv.config,
      log,
      (next) => {
        // ledger.path waits for a restart, but the CLI reads the file as it is now.
        recordAt(next);
        return hub.reload(next);
      },
      { watchFile: argv.watch, loadedText },
    );
    hub.reloadConfigFile = () => watcher.reloadNow('POST /admin/reload');
    // Before the line that says the hub listens: a supervisor may act on it at once.
    signals.onStop(async (signal) => {
      watcher.close();
      log.info({ signal, inFlight: hub.inflight.count }, 'shutting down: draining calls in flight');
      await hub.stop();
      log.info('stopped');
      log.flush();
      process.exit(0);
    });
    // Only once the port is ours: a hub that cannot serve spawns nothing. No request is read
    // before this line runs (it follows the listen callback without yielding to I/O).
    hub.startUpstreams();
    log.info({ url: `http://${addr.address.includes(':') ? `[${addr.address}]` : addr.address}:${addr.port}/mcp`, admin: adminAt, servers: hub.handles.size }, 'switchyard listening');
    // Listening is fine, but fetch-based clients (the CLI's too) will never connect: said where the operator looks.
    for (const m of badPortWarnings(config, addr.port, argv.port !== undefined ? '--port' : 'listen.port')) log.warn(m);
    const advice = gcAdvice(process.execArgv, usableCpus());
    if (advice) log.info(advice);
    // After the first start of the upstreams, which a reload's changes then act on.
    signals.onReload(() => void watcher.reloadNow('SIGHUP'));
  },
};

/**
 * Where this daemon listens, in its state folder (daemon-record.ts): after an edit of `listen`,
 * which only a restart applies, the CLI finds it there rather than at the address the file names
 * now. A record that cannot be written costs only that: the hub serves all the same.
 */
function recordAddress(configFile: string, config: HubConfig, addr: AddressInfo, adminAt: string | undefined, log: Logger): (next: HubConfig) => void {
  const admin = config.listen.admin;
  let adminAddress: { path: string } | { host: string; port: number } | undefined;
  if (admin && 'path' in admin) adminAddress = { path: admin.path };
  else if (adminAt !== undefined) {
    const u = new URL(adminAt);
    adminAddress = { host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port) };
  }
  const file = resolve(config.file ?? configFile);
  const ledger = config.ledger.enabled === false ? undefined : config.ledger.path === ':memory:' ? ':memory:' : resolve(dirname(file), config.ledger.path);
  const record = { config: file, listen: { host: addr.address, port: addr.port }, fileListen: { host: config.listen.host, port: config.listen.port }, admin: adminAddress, ledger };
  const written = new Set<string>();
  const writeAt = (file: string): void => {
    if (written.has(file)) return;
    written.add(file);
    try {
      writeDaemonRecord(file, record);
    } catch (err) {
      log.warn({ file, err: (err as Error).message }, 'could not record where the daemon listens: after an edit of listen, the CLI finds it only at the address the config names (or with --url)');
    }
  };
  writeAt(daemonRecordFile(config.ledger.path, config.file ?? configFile));
  /**
   * A reloaded file naming another ledger.path (applied at the next restart): the record is
   * written beside that ledger too, where the CLI reading the file now looks for it. Only beside
   * the old one, an edit of ledger.path with one of listen (or a port 0 daemon) left the CLI
   * saying no daemon was running (exit 3) while one was. Each is removed when the daemon exits.
   */
  return (next) => writeAt(daemonRecordFile(next.ledger.path, next.file ?? configFile));
}
