import type { Argv, CommandModule } from 'yargs';
import { createLogger, redactLogText } from '../log.js';
import { HttpBridge } from '../transport/http-bridge.js';
import { LineReader } from '../transport/line-reader.js';
import { httpUrl } from './daemon-client.js';
import { notEmpty } from './given-once.js';
import { lastFlush } from './last-flush.js';
import { envMs } from '../env-ms.js';
import { FarBehind } from '../downstream/far-behind.js';
import { lineText, tooLargeLine } from '../downstream/stdio-lines.js';

interface ConnectArgs {
  url: string;
  key?: string;
}

/**
 * The longest line read before the hub says its own limit (listen.maxBodyBytes, on its answer to
 * initialize or server/discover), or when it is lower: a line up to this goes to the hub, which
 * refuses one past its limit (413, with its row) and is answered with the line's id; a longer one
 * is never buffered whole (tooLong).
 */
const MAX_LINE_BYTES = 64 * 1024 * 1024;

export const connectCommand: CommandModule<object, ConnectArgs> = {
  command: 'connect',
  describe: 'Bridge stdin/stdout to a running hub over HTTP, so IDEs that spawn commands share one daemon',
  builder: (y: Argv) =>
    y
      .option('url', {
        type: 'string',
        default: process.env.SWITCHYARD_URL ?? 'http://127.0.0.1:7410/mcp',
        describe: 'The hub endpoint (env SWITCHYARD_URL)',
      })
      .option('key', {
        type: 'string',
        describe: 'API key sent as a Bearer token (prefer env SWITCHYARD_API_KEY: arguments are visible to other local users)',
      })
      // Read as no key, `--key "$KEY"` with KEY unset overrode SWITCHYARD_API_KEY and sent none
      // (a 401 later, blaming the hub). Said as `ledger keys --key ''` is, with what leaving it out does here.
      .check(notEmpty([['key', 'give the API key, or leave the option out to send SWITCHYARD_API_KEY (an unset variable in a script?)']])) as Argv<ConnectArgs>,
  handler: async (argv) => {
    const log = createLogger();
    const key = argv.key ?? process.env.SWITCHYARD_API_KEY;
    const url = httpUrl(argv.url);
    if (!url) {
      // Not typed (the option's default is the environment's): "--url" sent the user looking
      // for an option no one gave.
      const typed = process.argv.some((a) => a === '--url' || a.startsWith('--url='));
      const source = !typed && process.env.SWITCHYARD_URL !== undefined ? 'SWITCHYARD_URL' : '--url';
      process.stderr.write(`switchyard connect: ${source} must be an http(s) URL, got ${JSON.stringify(argv.url)}\n`);
      process.exit(2);
    }
    // The daemon's address alone (as `servers --url` takes it) means its endpoint.
    if (url.pathname === '/' && url.search === '') {
      url.pathname = '/mcp';
      log.info({ url: redactLogText(url.href) }, 'connect: --url names no path; using the hub endpoint /mcp');
    }
    /**
     * One message on stdout. When its buffer is full (the client is not reading), stdin is
     * paused until it drains, as `stdio` does: no new request is read whose answer would pile up
     * in this process's memory. What is already in flight still answers into the buffer; the
     * notifications it streams meanwhile are left out or held back while the client is far
     * behind, as `stdio` does (far-behind.ts): the bridge reads the hub's stream as fast as it
     * comes, so the hub never sees this client fall behind.
     */
    let throttled = false;
    const behind = new FarBehind('connect');
    const write = (msg: object) => {
      if (behind.takes(msg, process.stdout.writableLength, log)) return;
      if (!process.stdout.write(JSON.stringify(msg) + '\n') && !throttled) {
        throttled = true;
        process.stdin.pause();
        log.debug('connect: stdout is full (the client is not reading it): stdin paused until it drains');
      }
    };
    process.stdout.on('drain', () => {
      for (const msg of behind.drained(log)) write(msg);
      if (!throttled) return;
      throttled = false;
      process.stdin.resume();
    });
    // SWITCHYARD_STREAM_RETRY_MS: the longest wait before trying the notification stream again
    // while the daemon is away (default 3 s): less hears of changes sooner after a restart.
    const streamRetryMaxMs = envMs('SWITCHYARD_STREAM_RETRY_MS', 3_000);
    const bridge = new HttpBridge(
      {
        url: url.href,
        headers: key ? { authorization: `Bearer ${key}` } : undefined,
        streamRetryMaxMs,
        log,
        // A hub that takes larger bodies than the bridge's own bound gets lines that large.
        onMaxBody: (bytes) => void (reader.maxBytes = Math.max(MAX_LINE_BYTES, bytes)),
      },
      write,
    );
    const reader = new LineReader(
      MAX_LINE_BYTES,
      // Read as `stdio` reads a line (a trailing CR and a leading byte order mark dropped): a
      // Windows tool's BOM before the first line was answered -32700 here, not in `stdio`.
      (line) => {
        const text = lineText(line);
        if (text !== undefined) bridge.line(text);
      },
      // Read as `stdio` reads one (tooLargeLine): a request's id at either end gets its answer.
      (ends) => bridge.tooLong(tooLargeLine(ends, reader.maxBytes, bridge.openQuestions), reader.maxBytes),
    );
    /**
     * How the stop under way began: stdin EOF lets what is in flight answer for up to the hub's
     * listen.drainTimeoutMs (as its handshake said it; 5 s until one did), as `stdio` does; a stop
     * signal ends it at once (answered, cancelled at the hub: stopNow), and each request read
     * after it is answered here, not sent (refuseNew). The first signal after
     * EOF is the client's next step, not a second signal (the SDK's stdio client closes stdin,
     * waits 2 s, then sends SIGTERM): it ends what still runs, as in `stdio`; it exited 1 saying
     * "second stop signal", the calls unanswered and running on at the hub. A second signal exits 1 at once.
     */
    let ending: 'eof' | 'signal' | undefined;
    const stoppedBy = (signal: string) => `switchyard connect was stopped (${signal}) while the request was in flight: it was cancelled at the hub (it may have been carried out in part)`;
    const stopped = (signal: string) => {
      bridge.refuseNew(`switchyard connect is stopping (${signal}): the request was not sent to the hub`);
      bridge.stopNow(stoppedBy(signal));
    };
    /** `unfinished`: why a request still running once the drain ran out ends (Bridge.close). */
    const end = async (drainMs: number, signal?: string, unfinished = signal === undefined ? undefined : stoppedBy(signal)) => {
      if (ending) {
        if (!signal) return;
        if (ending === 'signal') {
          log.warn({ signal }, 'connect: second stop signal; exiting now');
          log.flush();
          process.exit(1);
        }
        ending = 'signal';
        log.info({ signal }, 'connect: stop signal after stdin closed: ending what still runs now');
        stopped(signal);
        return;
      }
      ending = signal ? 'signal' : 'eof';
      if (signal) stopped(signal);
      await bridge.close(drainMs, unfinished);
      log.flush();
      // The last answers reach a client that still reads; one that stopped reading stdout gets
      // a few seconds, then the process exits anyway (it waited for that write for good).
      await lastFlush(process.stdout, log, 'connect: stdout');
      // Exit 3, as every command that finds no daemon (README, CLI: exit codes).
      const why = bridge.neverReached;
      if (why !== undefined) {
        process.stderr.write(
          `switchyard connect: no switchyard daemon answered at ${redactLogText(url.href)} (${why}): start one (switchyard start), or give its endpoint with --url or SWITCHYARD_URL\n`,
        );
        process.exit(3);
      }
      const refused = bridge.keyNeverTaken;
      if (refused !== undefined) {
        // With none sent, "refused this bridge's credential" sent the user looking for a wrong key.
        const what = key ? "refused this bridge's credential" : 'wants a credential, and this bridge sent none';
        process.stderr.write(`switchyard connect: the daemon at ${redactLogText(url.href)} ${what} (${redactLogText(refused)}): pass --key, or set SWITCHYARD_API_KEY\n`);
        process.exit(1);
      }
      process.exit(0);
    };
    // The client went away: nobody hears an answer, but what runs for it is cancelled at the hub.
    process.stdout.on('error', () => void end(0, undefined, 'the client went away (it closed its end of stdout) while the request was in flight: it was cancelled at the hub'));
    // A second of the drain for the cancellations to reach the hub before the session ends.
    process.on('SIGTERM', () => void end(1_000, 'SIGTERM'));
    process.on('SIGINT', () => void end(1_000, 'SIGINT'));
    // The terminal or the session that ran it went away: a stop as any other. It killed the
    // process (Node's default), the calls in flight unanswered and running on at the daemon, the
    // session left open there until it idled out (an hour). Nothing here to reload.
    process.on('SIGHUP', () => void end(1_000, 'SIGHUP'));
    process.stdin.on('data', (c: Buffer) => reader.push(c));
    process.stdin.on('end', () => {
      // The last line first (one without its newline may be an answer to a question).
      reader.end();
      bridge.inputEnded();
      const drainMs = bridge.drainMs(5_000);
      void end(drainMs, undefined, `the client closed switchyard connect's stdin, and the request was still in flight ${drainMs / 1000} s later: it was cancelled at the hub (it may have been carried out in part)`);
    });
  },
};
