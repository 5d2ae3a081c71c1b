/**
 * A child process speaking newline-delimited JSON-RPC on its stdin/stdout (digest §6.1).
 * Framing faults on stdout are logged and skipped, never fatal; stderr goes to the log. The
 * child runs in its own process group so that shutdown also reaches grandchildren (`npx`
 * wrappers), and every live group is killed when the hub process exits — by the exit hook
 * here, or by the watchdog of reaper.ts when the hub dies without running any code.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, statSync, type Stats } from 'node:fs';
import { resolve } from 'node:path';
import { EventEmitter } from 'node:events';
import { redactLogText, type Logger } from '../log.js';
import { redactedExcerpt } from '../policy/secret-text.js';
import { parseFrame, type Classified } from '../protocol/jsonrpc.js';
import { adoptGroup, HUB_MARK_VAR, hubMark, releaseGroup } from './reaper.js';
import { atTurnEnd, WRITE } from '../turn-end.js';
import { childEnv, type InheritEnv } from './child-env.js';
import { LogBudget } from '../log-budget.js';
import { monotonicNow } from '../monotonic.js';

export interface StdioChildOptions {
  command: string;
  args?: string[];
  /** Added to what is inherited (child-env.ts), over it. */
  env?: Record<string, string>;
  /** What of the hub's own environment the child gets (child-env.ts: a baseline by default). */
  inheritEnv?: InheritEnv;
  cwd?: string;
  /** Longest stdout line accepted, in bytes; longer lines are dropped. */
  maxFrameBytes: number;
  log: Logger;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  error?: string;
  /** With `error`: the hub itself had no file descriptors left for the pipes (EMFILE, ENFILE), or could start no process (EAGAIN, ENOMEM), no fault of the command's. */
  hubShort?: boolean;
  /** What its stderr said last that looks like the reason (redacted, shortened), if anything. */
  stderr?: string;
  /** Set when the hub ended it because one of its pipes closed while it ran (`closed its stdout`). */
  broke?: string;
}

const LOG_SNIPPET = 200;
const MAX_STDERR_LINE = 4096;
/** Lines of stderr kept for the reason of an exit: a stack trace's error line is among the last. */
const STDERR_TAIL = 20;
/** Stderr lines of one process logged a second at most (a start-up banner, a stack trace, fit). */
const STDERR_LINES_PER_S = 200;
const ERROR_LINE = /error|cannot|can't|not found|no such|denied|failed|invalid|refused|missing|unable/i;

/** A stderr line and when it was read (monotonicNow). */
export interface StderrLine {
  text: string;
  at: number;
}
/**
 * How long before the exit a line may have been written and still be taken for its cause: one
 * that reads like an error, up to ERROR_LINE_MS; any other (a usage text, `bye`), up to
 * LAST_LINE_MS. A server's ordinary log line written long before (`listening on stdio`), or an
 * error it got over an hour ago, was shown as why it exited when something else ended it.
 */
const ERROR_LINE_MS = 30_000;
const LAST_LINE_MS = 2_000;

/**
 * npm's own lines, as `npx` (the usual way a server is run) writes them: `npm error …` (npm 10
 * on; `npm ERR! …` before) on every line of a failure, which made every one of them read like
 * an error, and the last one always its pointer to npm's debug log (`A complete log of this run
 * can be found in: …`, the path on a line of its own before npm 10), shown as why the server
 * exited instead of `404 Not Found - GET https://registry.npmjs.org/…`. A warning (`npm warn
 * exec The following package was not found and will be installed`) is no reason either.
 */
const NPM_ERROR = /^npm (?:error|ERR!)\s*/;
const NPM_WARNING = /^npm (?:warn|WARN|notice)\b/;
const NPM_LOG_POINTER = /^npm (?:error|ERR!)\s+(?:A complete log of this run can be found in|\S*[\\/]_logs[\\/]\S*debug\S*\.log\s*$)/;

function errorLike(text: string): boolean {
  return !NPM_WARNING.test(text) && ERROR_LINE.test(text.replace(NPM_ERROR, ''));
}

/**
 * The line of a dying process's stderr that most likely says why: the last that sounds like an
 * error, else the last, each if written shortly enough before the exit (`exitAt`, monotonicNow;
 * a bare string is a line of that moment).
 */
export function stderrReason(tail: readonly (string | StderrLine)[], exitAt = 0): string | undefined {
  const lines = tail
    .map((l) => (typeof l === 'string' ? { text: l, at: exitAt } : l))
    .filter((l) => l.text.trim() !== '' && !/^Node\.js v\d/.test(l.text) && !NPM_LOG_POINTER.test(l.text));
  const last = lines.at(-1);
  const line = lines.findLast((l) => errorLike(l.text) && exitAt - l.at <= ERROR_LINE_MS) ?? (last && exitAt - last.at <= LAST_LINE_MS ? last : undefined);
  return line === undefined ? undefined : line.text.trim().slice(0, LOG_SNIPPET);
}

/**
 * How long a process whose stdout ended, or whose stdin refused a write, may take to exit on its
 * own: a process that is exiting closes its pipes a moment before its exit is seen.
 */
const HALF_CLOSED_GRACE_MS = 1000;

/**
 * Why a spawn failed, in words. A missing working directory fails as `spawn node ENOENT`
 * (and one that is a file as ENOTDIR), which reads as if the command were not installed.
 */
export function spawnFailure(err: NodeJS.ErrnoException, cwd: string | undefined): string {
  if (cwd !== undefined && (err.code === 'ENOENT' || err.code === 'ENOTDIR')) {
    let dir: Stats | undefined;
    try {
      dir = statSync(cwd);
    } catch {
      return `its working directory ${cwd} does not exist (cwd)`;
    }
    if (!dir.isDirectory()) return `its working directory ${cwd} is not a directory (cwd)`;
  }
  // `spawn X ENOENT` and `spawn X EACCES` are Node's words; a user reading `switchyard servers` wants the cause.
  const command = typeof err.path === 'string' ? err.path : undefined;
  if (command !== undefined && err.code === 'ENOENT' && command.includes('/') && existsSync(resolve(cwd ?? '.', command)))
    return `${err.message}: command "${command}" is there, but the interpreter its first line (#!) names was not found`;
  // A shell line pasted whole into `command` (`npx -y @scope/server`) is one program's name to spawn.
  if (command !== undefined && err.code === 'ENOENT' && /\s/.test(command.trim()))
    return `${err.message}: command "${command}" not found: \`command\` names the program alone (here "${command.trim().split(/\s+/)[0]}"), each of its arguments goes in \`args\``;
  if (command !== undefined && err.code === 'ENOENT') return `${err.message}: command "${command}" not found (not installed, or not on the PATH the server is given)`;
  if (command !== undefined && err.code === 'EACCES') return `${err.message}: command "${command}" is not executable (no execute permission on it, or on a folder of its path)`;
  if (err.code === 'EMFILE' || err.code === 'ENFILE')
    return `${err.message}: the hub has no file descriptors left for its pipes (too many open files: see listen.maxConnections, and the limit \`ulimit -n\`)`;
  if (err.code === 'EAGAIN') return `${err.message}: the hub may start no more processes now (its user's process limit, \`ulimit -u\`, or the system's, is reached)`;
  if (err.code === 'ENOMEM') return `${err.message}: the hub has no memory left to start a process`;
  return err.message;
}

/**
 * The spawn failed for want of the hub's own resources, whatever the command: file descriptors
 * for the pipes (EMFILE, ENFILE), a process of its own under the process limit (EAGAIN, which
 * fork returns at RLIMIT_NPROC or the system's limit), memory to fork with (ENOMEM). No crash of
 * the server's: see HubShortError.
 */
export function hubShortOf(err: NodeJS.ErrnoException): boolean {
  return err.code === 'EMFILE' || err.code === 'ENFILE' || err.code === 'EAGAIN' || err.code === 'ENOMEM';
}

/** A spawn that threw; `hubShort` as in ExitInfo. */
export class SpawnError extends Error {
  constructor(
    message: string,
    readonly hubShort: boolean,
  ) {
    super(message);
  }
}

/** How much of an over-long line is kept, at each end, to read the id of a response from it. */
const OVERSIZE_HEAD = 256;

/**
 * The last `OVERSIZE_HEAD` bytes of `before` followed by `piece`, copied (a chunk may be a view
 * into a pooled buffer). Only the trailing pieces that reach that far are joined: `before` may
 * be a whole line's buffered parts, megabytes.
 */
function tailOf(before: readonly Buffer[], piece: Buffer): Buffer {
  const kept: Buffer[] = [piece];
  for (let i = before.length - 1, n = piece.length; i >= 0 && n < OVERSIZE_HEAD; n += before[i]!.length, i--) kept.unshift(before[i]!);
  const joined = Buffer.concat(kept);
  return Buffer.from(joined.subarray(Math.max(0, joined.length - OVERSIZE_HEAD)));
}

/**
 * Splits a byte stream on `\n` (a `\r` before it is dropped), bounding each line. An over-long
 * line is never buffered whole: only its first and last bytes are kept and handed to onOversize.
 */
export class LineDecoder {
  private parts: Buffer[] = [];
  private size = 0;
  private discarding = false;
  private head: Buffer | undefined;
  private tail: Buffer | undefined;

  constructor(
    private readonly maxBytes: number,
    private readonly onLine: (line: string) => void,
    private readonly onOversize: (bytes: number, head: Buffer, tail: Buffer) => void,
  ) {}

  private headOf(piece: Buffer): Buffer {
    return Buffer.from(Buffer.concat([...this.parts, piece.subarray(0, OVERSIZE_HEAD)]).subarray(0, OVERSIZE_HEAD));
  }

  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(10, start);
      if (nl === -1) {
        this.keep(chunk.subarray(start));
        return;
      }
      const piece = chunk.subarray(start, nl);
      start = nl + 1;
      if (this.discarding) {
        this.onOversize(this.size + piece.length, this.head!, tailOf(this.tail ? [this.tail] : [], piece));
        this.discarding = false;
        this.head = undefined;
        this.tail = undefined;
        this.size = 0;
        continue;
      }
      if (this.size + piece.length > this.maxBytes) {
        this.onOversize(this.size + piece.length, this.headOf(piece), tailOf(this.parts, piece));
        this.parts = [];
        this.size = 0;
        continue;
      }
      let line: Buffer;
      if (this.parts.length === 0) line = piece;
      else {
        this.parts.push(piece);
        line = Buffer.concat(this.parts, this.size + piece.length);
        this.parts = [];
        this.size = 0;
      }
      let end = line.length;
      if (end > 0 && line[end - 1] === 13) end--;
      if (end > 0) this.onLine(line.toString('utf8', 0, end));
    }
  }

  /**
   * The input ended: a last line without its newline still counts (a server that writes its
   * final answer and exits, as LineReader takes a client's last line).
   */
  end(): void {
    if (this.discarding) {
      this.discarding = false;
      this.onOversize(this.size, this.head!, this.tail!);
      this.head = undefined;
      this.tail = undefined;
      this.size = 0;
      return;
    }
    if (this.size > 0) this.push(Buffer.from('\n'));
  }

  private keep(rest: Buffer): void {
    if (rest.length === 0) return;
    if (this.discarding) {
      this.size += rest.length;
      this.tail = tailOf(this.tail ? [this.tail] : [], rest);
      return;
    }
    if (this.size + rest.length > this.maxBytes) {
      // Past the bound: stop buffering, keep counting until the line ends.
      this.head = this.headOf(rest);
      this.tail = tailOf(this.parts, rest);
      this.discarding = true;
      this.size += rest.length;
      this.parts = [];
      return;
    }
    // A chunk may be a view into a larger pooled buffer that is reused; copy what we keep.
    this.parts.push(Buffer.from(rest));
    this.size += rest.length;
  }
}

const ID = '(-?\\d{1,15}|"(?:[^"\\\\]|\\\\.){0,200}")';
/** `{"jsonrpc":"2.0","id":7,"result"…` or `…"error"`: a response, its id first. */
const ID_FIRST = new RegExp(`^\\s*\\{\\s*(?:"jsonrpc"\\s*:\\s*"2\\.0"\\s*,\\s*)?"id"\\s*:\\s*${ID}\\s*,\\s*(?:"jsonrpc"\\s*:\\s*"2\\.0"\\s*,\\s*)?"(?:result|error)"\\s*:`);
/** `{"result"…` or `{"jsonrpc":"2.0","error"…`: a response (a request or notification starts otherwise)… */
const RESULT_FIRST = /^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"\s*:/;
/** …whose last member is its id: `…,"id":7}`, closing the frame (a nested id has more braces after it). */
const ID_LAST = new RegExp(`,\\s*"id"\\s*:\\s*${ID}\\s*\\}\\s*$`);

/**
 * The id of a response from the first and last bytes of its frame, when the frame is laid out
 * the usual ways: the id first (`{"jsonrpc":"2.0","id":7,"result"…`), or the result first and
 * the id last (`{"result":…,"jsonrpc":"2.0","id":7}`, as the official TypeScript SDK writes
 * them), so that the call it answers can fail at once instead of waiting for its timeout.
 * Anything less certain gives undefined.
 */
export function responseIdOf(head: string, tail = ''): number | string | undefined {
  const m = ID_FIRST.exec(head) ?? (RESULT_FIRST.test(head) ? ID_LAST.exec(tail) : null);
  if (!m) return undefined;
  if (m[1]!.startsWith('"')) {
    try {
      return JSON.parse(m[1]!) as string;
    } catch {
      return undefined;
    }
  }
  return Number(m[1]);
}

/** Process groups alive right now; killed synchronously if the hub exits. */
const liveGroups = new Set<number>();
let exitHookInstalled = false;

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const pid of liveGroups) killGroup(pid, 'SIGKILL');
  });
}

/** How long what a leader left in its group has to go after SIGTERM, before SIGKILL. */
const GROUP_GRACE_MS = 2000;

/**
 * The leader is gone; anything it left behind in its group (an `npx` grandchild) goes too:
 * SIGTERM now, and SIGKILL after a grace for what ignores it. The group stays with the exit
 * hook and the watchdog until it is empty, so a hub that dies meanwhile still ends it.
 */
function endGroup(pgid: number): void {
  killGroup(pgid, 'SIGTERM', false);
  const release = (): void => {
    liveGroups.delete(pgid);
    releaseGroup(pgid);
  };
  if (!groupAlive(pgid)) return release();
  setTimeout(() => {
    killGroup(pgid, 'SIGKILL', false);
    release();
  }, GROUP_GRACE_MS).unref();
}

function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Signals the child's process group. `orLeader` falls back to the pid alone (for a child that
 * somehow is not a group leader); never used once the leader has exited, as its pid may be
 * reused by then.
 */
function killGroup(pid: number, signal: NodeJS.Signals, orLeader = true): void {
  try {
    process.kill(-pid, signal);
  } catch {
    if (!orLeader) return;
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/**
 * Events: 'message' (Classified) for every valid JSON-RPC line, and for a response the hub
 * refuses (nested too deep, a result that is no object) that names its id, so its call fails at
 * once; 'exit' (ExitInfo) once; 'dropped' ({id, what}) for a stdout line longer than
 * maxFrameBytes (`id` read from its first bytes, when it could be), as "answered with …" goes on.
 */
export class StdioChild extends EventEmitter {
  readonly pid: number | undefined;
  private readonly proc: ChildProcess;
  private exitInfo: ExitInfo | undefined;
  private readonly exited: Promise<ExitInfo>;
  private readonly log: Logger;
  private readonly stderrTail: StderrLine[] = [];
  private closing = false;
  private broke: string | undefined;
  private halfClosed: NodeJS.Timeout | undefined;
  /**
   * Stdout lines that are not JSON-RPC are logged 10 per 10 s, the rest counted: a server that
   * prints its debugging to stdout would otherwise put a warning per line into the hub's log,
   * crowding out (and, past the log's buffer, dropping) everything else.
   */
  private readonly skipped = new LogBudget(10, 10_000);
  /**
   * Stderr lines are logged up to STDERR_LINES_PER_S a second, the rest counted: a server
   * flooding its stderr (a debug mode, a loop printing an error) had every line logged, a third
   * of a core spent on them, and, past the log's buffer, the hub's own lines dropped with them.
   */
  private readonly stderrLogged = new LogBudget(STDERR_LINES_PER_S, 1000);

  constructor(opts: StdioChildOptions) {
    super();
    this.log = opts.log;
    installExitHook();
    let onExit!: (e: ExitInfo) => void;
    this.exited = new Promise((r) => (onExit = r));
    const finish = (e: ExitInfo): void => {
      if (this.exitInfo) return;
      const said = stderrReason(
        this.stderrTail.map((l) => ({ text: redactLogText(l.text), at: l.at })),
        monotonicNow(),
      );
      if (said !== undefined) e.stderr = said;
      if (this.broke !== undefined) e.broke = this.broke;
      clearTimeout(this.halfClosed);
      const more = this.skipped.leftOut();
      if (more > 0) this.log.warn({ lines: more }, `skipped ${more} more stdout lines that are not JSON-RPC (not logged one by one)`);
      const unsaid = this.stderrLogged.leftOut();
      if (unsaid > 0) this.log.info({ lines: unsaid }, `left ${unsaid} more child stderr lines out of the log (over ${STDERR_LINES_PER_S} a second)`);
      this.exitInfo = e;
      if (this.pid !== undefined) endGroup(this.pid);
      // What the process left in a session of its own holds the pipes on, out of reach of
      // endGroup: the hub's ends are let go, or it would read that output under this server's
      // name and keep three descriptors per restart of a crash-looping server.
      this.proc?.stdin?.destroy();
      this.proc?.stdout?.destroy();
      this.proc?.stderr?.destroy();
      onExit(e);
      this.emit('exit', e);
    };

    const env = childEnv(process.env, opts.inheritEnv, opts.env);
    // Last, over the config's: the watchdog finds by it a child the hub died before announcing.
    if (process.platform !== 'win32') env[HUB_MARK_VAR] = hubMark();
    try {
      this.proc = spawn(opts.command, opts.args ?? [], {
        cwd: opts.cwd,
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
        detached: true,
        windowsHide: true,
      });
    } catch (err) {
      // Some failures (ENOTDIR, E2BIG) are thrown rather than reported as an 'error' event.
      throw new SpawnError(spawnFailure(err as NodeJS.ErrnoException, opts.cwd), hubShortOf(err as NodeJS.ErrnoException));
    }
    this.pid = this.proc.pid;
    if (this.pid !== undefined) {
      liveGroups.add(this.pid);
      adoptGroup(this.pid);
    }

    this.proc.on('error', (err) => {
      // Spawn failures (ENOENT, EACCES) may come without an 'exit'.
      if (this.proc.pid === undefined || this.proc.exitCode !== null) finish({ code: null, signal: null, error: spawnFailure(err, opts.cwd), ...(hubShortOf(err) ? { hubShort: true } : {}) });
      else this.log.warn({ err: err.message }, 'child process error');
    });
    // Out of file descriptors (EMFILE, ENFILE), Node sets no pipes up and says why by 'error' on
    // the next tick (above): reading the missing pipes threw a TypeError ("Cannot read properties
    // of undefined (reading 'on')") that became the server's error.
    if (!this.proc.stdin || !this.proc.stdout || !this.proc.stderr) return;
    this.proc.on('exit', (code, signal) => {
      // Let stdout and stderr drain first so a final response written just before exiting is
      // not lost, nor the stderr line that says why it exited; a grandchild holding a pipe open
      // must not delay the verdict for long.
      const open = [this.proc.stdout!, this.proc.stderr!].filter((s) => !s.readableEnded && !s.destroyed);
      if (open.length === 0) return finish({ code, signal });
      const t = setTimeout(() => finish({ code, signal }), 200);
      let left = open.length;
      for (const s of open)
        s.once('close', () => {
          if (--left > 0) return;
          clearTimeout(t);
          finish({ code, signal });
        });
    });
    // EPIPE after the child died is reported through 'exit'; never let it throw.
    this.proc.stdin!.on('error', (err) => {
      this.log.debug({ err: err.message }, 'child stdin error');
      this.pipeEnded('closed its stdin');
    });

    const out = new LineDecoder(
      opts.maxFrameBytes,
      (line) => this.onLine(line),
      (bytes, head, tail) => {
        this.log.warn({ bytes, limit: opts.maxFrameBytes }, 'dropped an oversized stdout frame');
        this.emit('dropped', { id: responseIdOf(head.toString('utf8'), tail.toString('utf8')), what: `a message of ${bytes} bytes, over the limit of ${opts.maxFrameBytes} (maxFrameBytes)` });
      },
    );
    this.proc.stdout!.on('data', (c: Buffer) => out.push(c));
    this.proc.stdout!.on('end', () => {
      out.end();
      this.pipeEnded('closed its stdout');
    });
    const err = new LineDecoder(
      MAX_STDERR_LINE,
      (line) => {
        // Kept as read, redacted when used: a flood's lines left out of the log cost no redaction.
        this.stderrTail.push({ text: line, at: monotonicNow() });
        if (this.stderrTail.length > STDERR_TAIL) this.stderrTail.shift();
        const b = this.stderrLogged.take();
        if (!b) return;
        const text = redactLogText(line);
        this.log.info(b.skipped > 0 ? { stderr: text, leftOutBefore: b.skipped } : { stderr: text }, 'child stderr');
      },
      (bytes) => this.log.info({ bytes }, 'child stderr: long line omitted'),
    );
    this.proc.stderr!.on('data', (c: Buffer) => err.push(c));
    this.proc.stderr!.on('end', () => err.end());
  }

  /**
   * A pipe to the process ended. If the process is not exiting, it can never answer (stdout) or
   * hear (stdin) again, yet would look alive forever, every call to it waiting for its timeout:
   * it is ended, so that it is restarted like one that crashed.
   */
  private pipeEnded(what: string): void {
    if (this.exitInfo || this.closing || this.halfClosed || this.pid === undefined) return;
    const pid = this.pid;
    this.halfClosed = setTimeout(() => {
      if (this.exitInfo || this.closing) return;
      this.broke = what;
      this.log.warn({ pid }, `the process ${what} while still running; ending it`);
      killGroup(pid, 'SIGTERM');
      setTimeout(() => this.kill(), GROUP_GRACE_MS).unref();
    }, HALF_CLOSED_GRACE_MS);
    this.halfClosed.unref();
  }

  get alive(): boolean {
    return this.exitInfo === undefined && this.pid !== undefined;
  }

  /** Resolves once the process has exited. */
  get exit(): Promise<ExitInfo> {
    return this.exited;
  }

  /**
   * Writes one frame (a serialised JSON-RPC message). False when the child is not running.
   * `join`: the caller has other calls in flight on this child, so the frame may wait for the
   * end of the event-loop turn and leave in one write with the others sent in that turn (under
   * load, one syscall and one wake-up of the child for ~20 calls). A lone call is written at
   * once, so joining costs no latency when the hub is idle. Frames never overtake each other.
   */
  send(frame: string, join = false): boolean {
    if (!this.alive || !this.proc.stdin!.writable) return false;
    if (this.queued.length === 0) {
      if (!join) {
        this.proc.stdin!.write(frame + '\n');
        return true;
      }
      atTurnEnd(WRITE, this.flush);
    }
    this.queued.push(frame);
    this.queuedLength += frame.length + 1;
    return true;
  }

  private queued: string[] = [];
  /** What `queued` will write (string length, as writableLength counts a string written). */
  private queuedLength = 0;

  /**
   * What was written to the child's stdin that it has not read yet, with the frames joined for
   * this turn: without them, a turn that sent many calls (a loaded hub finishing many requests in
   * one turn) passed them all under the bound StdioUpstream refuses calls at.
   */
  get backlog(): number {
    return (this.proc.stdin?.writableLength ?? 0) + this.queuedLength;
  }

  private readonly flush = (): void => {
    const q = this.queued;
    if (q.length === 0) return;
    this.queued = [];
    this.queuedLength = 0;
    if (this.proc.stdin!.writable) this.proc.stdin!.write(q.length === 1 ? q[0] + '\n' : q.join('\n') + '\n');
  };

  private onLine(line: string): void {
    // A byte order mark before a message (a .NET UTF-8 console writes one first) is not JSON,
    // and RFC 8259 §8.1 lets a parser ignore it: rejecting it loses the answer to the era probe.
    if (line.charCodeAt(0) === 0xfeff) line = line.slice(1);
    const c: Classified = parseFrame(line);
    if (c.kind === 'invalid') {
      this.noteSkipped(line, c.error.message);
      // An answer the hub cannot take: its call fails now rather than at its timeout.
      if (!(c.response && c.id !== undefined)) return;
    }
    this.emit('message', c);
  }

  private noteSkipped(line: string, reason: string): void {
    const b = this.skipped.take();
    if (!b) return;
    // Redacted before the cut: a secret across it would leave its first part, which no rule recognises.
    const shown = redactedExcerpt(line, LOG_SNIPPET, redactLogText) + (line.length > LOG_SNIPPET ? '…' : '');
    this.log.warn(b.skipped > 0 ? { line: shown, reason, leftOutBefore: b.skipped } : { line: shown, reason }, 'skipped a stdout line that is not JSON-RPC');
  }

  /** Immediate SIGKILL of the whole group. */
  kill(): void {
    if (this.pid !== undefined && this.exitInfo === undefined) killGroup(this.pid, 'SIGKILL');
  }

  /** Polite shutdown: end stdin, then SIGTERM the group, then SIGKILL it. */
  async close(graceMs = 2000): Promise<ExitInfo> {
    if (this.exitInfo) return this.exitInfo;
    if (this.pid === undefined) return this.exited;
    this.closing = true;
    this.flush();
    this.proc.stdin!.end();
    if (await this.within(graceMs)) return this.exitInfo!;
    killGroup(this.pid, 'SIGTERM');
    if (await this.within(graceMs)) return this.exitInfo!;
    killGroup(this.pid, 'SIGKILL');
    return this.exited;
  }

  private within(ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), ms);
      void this.exited.then(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }
}
