import type { Argv, CommandModule } from 'yargs';
import { ConfigError, loadConfig } from '../config/load.js';
import type { HubConfig } from '../config/types.js';
import { configErrorText, configProblemLines } from './config-problems.js';
import { StdioServer } from '../downstream/stdio-server.js';
import { configText, watchConfig } from '../config/watch.js';
import { Hub } from '../hub.js';
import { consoleToStderr, createLogger, redactLogText, takeStdout } from '../log.js';
import { LedgerLockError, ledgerTrouble, lockLedger } from './ledger-lock.js';
import { lastFlush } from './last-flush.js';
import { ServeSignals } from './serve-signals.js';
import { whenEndedEmpty } from './stdin-gone.js';
import { refuseRead } from './refuse-read.js';
import { UsageError } from './usage-error.js';
import { monotonicNow } from '../monotonic.js';

/** listen.maxBodyBytes's default (the config schema's), for the lines read before a config is loaded. */
const DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024;

interface StdioArgs {
  config: string;
  group?: string;
  'ledger-wait-ms': number;
}

export const stdioCommand: CommandModule<object, StdioArgs> = {
  command: 'stdio',
  describe: 'Serve the hub over stdin/stdout (both protocol eras), for clients that spawn a command',
  builder: (y: Argv) =>
    y
      .option('config', { alias: 'c', type: 'string', default: 'hub.config.json', describe: 'Config file' })
      .option('group', { alias: 'g', type: 'string', describe: 'Serve only this tool group (groups.<name>), as /mcp/<name> does over HTTP: for a client that takes few tools' })
      .option('ledger-wait-ms', { type: 'number', default: 10_000, describe: 'How long to wait for another hub holding the ledger to let it go before exiting 2' })
      // Not a number (`--ledger-wait-ms 10s`: NaN) was a wait that never ran out.
      .check((a) => {
        const ms = a['ledger-wait-ms'] as number;
        if (!(Number.isFinite(ms) && ms >= 0)) throw new UsageError('--ledger-wait-ms must be a number of milliseconds, 0 or more');
        return true;
      }) as Argv<StdioArgs>,
  handler: async (argv) => {
    // stdout is the protocol channel: logs go to stderr only (src/log.ts).
    consoleToStderr(); // before any plugin loads
    const stdout = takeStdout();
    const log = createLogger();
    // First: a signal from here on is handled (serve-signals.ts). Until the hub exists nothing
    // is started, and nothing was written to stdout: a stop is an exit (once the ledger's lock
    // is waited for, with what the client asked answered: exitUnserved).
    const signals = new ServeSignals(log);
    let stopWatching = (): void => undefined;
    /** The longest line read (listen.maxBodyBytes), its default until the config is loaded. */
    let maxLineBytes = DEFAULT_MAX_LINE_BYTES;
    /**
     * Exits before serving, `reason` on stderr (unless `said` there already): each request the
     * client sends until the exit (an initialize written right after the spawn, while this waited
     * for the ledger) is answered with it, not left waiting for an answer that never comes
     * (refuseRead).
     */
    let exiting = false;
    const exitUnserved = async (code: number, reason: string, said = false): Promise<never> => {
      // One exit: a stop signal while it reads and answers (the wait ran out, the hub could not be
      // made) would read stdin beside it, say another reason and exit 0 as soon as its own read went
      // quiet, perhaps before the first one's answers were written.
      if (exiting) return new Promise<never>(() => undefined);
      exiting = true;
      stopWatching();
      if (!said) process.stderr.write(`switchyard stdio: ${reason}\n`);
      // No await between its last read of stdin and the exit: a request read is a request answered.
      const { unsent } = await refuseRead(process.stdin, stdout, `switchyard stdio cannot serve: ${reason}`, maxLineBytes);
      if (unsent > 0) log.warn({ unsent }, 'stdout not read by the client: exiting with answers unsent');
      log.flush();
      process.exit(code);
    };
    // A stop signal before it serves (the ledger waited for, up to --ledger-wait-ms; an exit
    // unserved under way is the one exit): logged as any stop before starting is
    // (serve-signals.ts), then what the client asks is answered.
    signals.onStop((signal) => {
      log.info({ signal }, 'stopped before starting');
      void exitUnserved(0, `stopped by ${signal} before it could serve`);
    });
    // Before the load: an edit from here on is applied once the hub serves (watchConfig).
    const loadedText = configText(argv.config);
    let config: HubConfig;
    try {
      config = loadConfig(argv.config);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      // Each problem on its own line, as every command says them; the client is told the first.
      const lines = configProblemLines(err, argv.config);
      process.stderr.write(configErrorText(err, argv.config, 'stdio'));
      return exitUnserved(2, `${argv.config}: ${lines[0] ?? 'not a usable config'}${lines.length > 1 ? ` (and ${lines.length - 1} more problems: see its stderr)` : ''}`, true);
    }
    maxLineBytes = config.listen.maxBodyBytes;
    if (argv.group !== undefined && !Object.hasOwn(config.groups ?? {}, argv.group)) {
      const names = Object.keys(config.groups ?? {});
      return exitUnserved(2, `no tool group named ${JSON.stringify(argv.group)} in ${argv.config} (${names.length ? `groups: ${names.join(', ')}` : 'it has no groups'})`);
    }
    try {
      // A client's version probe may run a second copy of this command a moment earlier: wait for it.
      await lockLedger(config, 'switchyard stdio', argv['ledger-wait-ms'], (holder) => {
        log.info({ holder }, `the ledger is in use by pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}: waiting up to ${argv['ledger-wait-ms'] / 1000} s for it`);
        // Unless the client is gone: nothing would be left to serve once the ledger is free.
        stopWatching = whenEndedEmpty(process.stdin, () => {
          log.info('stdin closed while waiting for the ledger, nothing asked: exiting');
          log.flush();
          process.exit(0);
        });
      });
      stopWatching();
      // Stopped while it waited: the exit is under way (its answers being written), nothing starts.
      if (exiting) return await new Promise<never>(() => undefined);
    } catch (err) {
      if (exiting) return await new Promise<never>(() => undefined);
      if (!(err instanceof LedgerLockError)) throw err;
      return exitUnserved(2, err.message);
    }
    let hub: Hub;
    try {
      hub = Hub.create(config, log);
    } catch (err) {
      const ledger = ledgerTrouble(err, config);
      if (ledger) return exitUnserved(1, ledger);
      // As `start` does: one line, no stack (a stack may quote a config value, a URL with its
      // credentials), and the client's log gets it on stderr.
      return exitUnserved(2, `${argv.config}: ${redactLogText((err as Error).message)}`);
    }
    hub.startUpstreams();
    const drainMs = config.listen.drainTimeoutMs;
    const server = new StdioServer(hub.endpoint, process.stdin, stdout, log, {
      maxLineBytes: config.listen.maxBodyBytes,
      // stdin EOF lets what is in flight answer for up to listen.drainTimeoutMs, as SIGTERM does.
      drainMs,
      onSessionClosed: (key) => hub.sessionClosed(key),
      endListens: () => hub.endpoint.listen.closeAll(),
      gate: hub.gate,
      group: argv.group,
    });
    const watcher = watchConfig(argv.config, log, async (next) => void (await hub.reload(next)), { loadedText });
    let stopping = false;
    /**
     * As `start` does (docs/RELIABILITY.md, Stopping): new requests are refused (answered), calls
     * in flight finish for up to listen.drainTimeoutMs (stdin is still read meanwhile: a client's
     * answer to a question, a cancellation), then the upstreams close, the ledger is flushed, and
     * the process exits 0. At stdin EOF the server has drained already.
     *
     * stdin EOF is the client's first request to stop, and a client that then signals has given
     * the drain all the time it means to: the official SDK's stdio client closes stdin, waits
     * 2 s, sends SIGTERM, and SIGKILLs 2 s later, which would leave a call still draining with no
     * outcome (`unknown` at the next start). So the first stop signal after stdin EOF ends what
     * still runs at once (answered -32603 and audited unavailable: HubStoppingError), and the stop goes on to exit 0. A
     * second signal exits at once with 1 (ServeSignals).
     */
    const stop = async (reason: string, signal = false) => {
      if (stopping) {
        if (!signal) return;
        // Only the stop begun at stdin EOF gets here: a signal's own stop is signalled again through ServeSignals.
        log.info({ signal: reason, inFlight: hub.inflight.count }, 'stop signal after stdin closed: ending what still runs now');
        void server.stop();
        return;
      }
      stopping = true;
      watcher.close();
      log.info({ reason, inFlight: hub.inflight.count }, 'stdio hub stopping');
      // On the monotonic clock, as the drain's own (a wall clock stepped back kept the hub's stop waiting that long).
      const deadline = monotonicNow() + drainMs;
      if (signal) {
        hub.stopAccepting();
        if (server.inputEnded) log.info({ signal: reason, inFlight: hub.inflight.count }, 'stop signal after stdin closed: ending what still runs now');
        await (server.inputEnded ? server.stop() : server.drain(drainMs));
      } else await server.stop();
      await hub.stop(Math.max(0, deadline - monotonicNow()), () => server.stopReading());
      log.flush();
      // Answers written just before stdin closed must reach the client before we exit; a client
      // that stopped reading stdout gets them for a few seconds, then the process exits anyway.
      await lastFlush(stdout, log);
      process.exit(0);
    };
    signals.onStop((signal) => void stop(signal, true));
    // After the first start of the upstreams, which a reload's changes then act on.
    signals.onReload(() => void watcher.reloadNow('SIGHUP'));
    await server.run();
    // The run ends at stdin EOF (drained), or when stdout broke (the client gone: stopped at once).
    await stop(server.outputClosed ? 'stdout closed' : 'stdin closed');
  },
};
