import type { Logger } from '../log.js';

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
  private stop: ((signal: StopSignal) => void) | undefined;
  private reload: (() => void) | undefined;
  private hupWaiting = false;

  constructor(private readonly log: Logger) {
    process.on('SIGTERM', () => this.stopSignal('SIGTERM'));
    process.on('SIGINT', () => this.stopSignal('SIGINT'));
    process.on('SIGHUP', () => this.hangUp());
  }

  /**
   * How to stop from now on; a signal received before this is acted on at once. A second
   * signal exits at once with 1, whatever this is.
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
      this.log.warn({ signal }, 'second stop signal; exiting now');
      this.log.flush();
      process.exit(1);
    }
    this.stopping = signal;
    this.stop?.(signal);
  }

  private hangUp(): void {
    if (this.reload) return this.reload();
    this.hupWaiting = true;
  }
}
