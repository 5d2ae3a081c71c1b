import type { Logger } from '../log.js';
import { monotonicNow } from '../monotonic.js';

/**
 * The same stop signal again within this long of the first is the same request, delivered
 * twice: a terminal's Ctrl-C reaches every process of its foreground job, so under `npm start`
 * the hub gets one SIGINT from the terminal and one that npm passes on; systemd's default
 * KillMode sends SIGTERM to every process of the unit, npm too, which passes it on. Taken as a
 * second signal, it skipped the drain and exited 1. A person who means "now" presses again
 * after seeing the hub drain.
 */
export const SAME_REQUEST_MS = 500;

type StopSignal = 'SIGTERM' | 'SIGINT';

/**
 * SIGTERM, SIGINT and SIGHUP for a serving command (`start`, `stdio`), handled from its first
 * line. Until Node has a handler for a signal, the signal's default action applies: SIGTERM,
 * SIGINT and SIGHUP end the process at once (no drain, no log, lines still in the logger's
 * buffer lost, exit by signal); as PID 1 of a container the kernel drops them instead, and the
 * hub went on starting while `docker stop` waited to SIGKILL it. A start takes a while (the
 * ledger's lock may be waited for, the ledger opened, plugins loaded, the port bound), and a
 * supervisor signals whenever it likes: a SIGHUP sent by a config tool right after the start
 * killed the hub.
 *
 * The command says how to stop at each phase (`onStop`): with nothing started yet, an exit;
 * while a step of the start is under way, a note, and the command looks at `stopping` after
 * the step; once it serves, the drain. A SIGHUP before the command can reload (`onReload`) is
 * kept: the config is read again once the hub serves (the file may have changed since it was
 * read).
 */
export class ServeSignals {
  /** The stop signal received, once one came (the first). */
  stopping: StopSignal | undefined;
  /**
   * When it came (monotonicNow()). Not the wall clock: stepped back between two signals, a second
   * one meant as "now" was taken as the same request (ignored); stepped ahead, a copy sent with
   * the first (systemd's KillMode) ended the hub without its drain.
   */
  private firstAt = 0;
  /** Until the command says otherwise (onStop): nothing is started yet, so a stop is an exit. */
  private stop: (signal: StopSignal) => void = (signal) => {
    this.log.info({ signal }, 'stopped before starting');
    this.log.flush();
    process.exit(0);
  };
  private reload: (() => void) | undefined;
  private hupWaiting = false;

  constructor(private readonly log: Logger) {
    process.on('SIGTERM', () => this.stopSignal('SIGTERM'));
    process.on('SIGINT', () => this.stopSignal('SIGINT'));
    process.on('SIGHUP', () => this.hangUp());
  }

  /**
   * How to stop from now on; a signal received before this is acted on at once. A second
   * signal (not the same one within SAME_REQUEST_MS) exits at once with 1, whatever this is.
   */
  onStop(stop: (signal: StopSignal) => void): void {
    this.stop = stop;
    if (this.stopping) stop(this.stopping);
  }

  /** How to reload from now on; a SIGHUP received before this reloads now. */
  onReload(reload: () => void): void {
    this.reload = reload;
    if (!this.hupWaiting) return;
    this.hupWaiting = false;
    this.log.info({ signal: 'SIGHUP' }, 'reading the config again for the SIGHUP received while starting');
    reload();
  }

  private stopSignal(signal: StopSignal): void {
    if (this.stopping) {
      if (signal === this.stopping && monotonicNow() - this.firstAt < SAME_REQUEST_MS) {
        this.log.debug({ signal }, 'the same stop signal again at once: taken as the same request');
        return;
      }
      this.log.warn({ signal }, 'second stop signal; exiting now');
      this.log.flush();
      process.exit(1);
    }
    this.stopping = signal;
    this.firstAt = monotonicNow();
    this.stop(signal);
  }

  private hangUp(): void {
    if (this.reload) return this.reload();
    this.hupWaiting = true;
  }
}
