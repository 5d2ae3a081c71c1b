import { Console } from 'node:console';
import { createRequire } from 'node:module';
import { pino, type Logger } from 'pino';
import { redactConfigSecrets, redactConfigSecretsInJson } from './policy/config-secrets.js';
import { redactLogText } from './policy/secret-text.js';
import { monotonicNow } from './monotonic.js';

export type { Logger };
/** Text from outside the hub (an upstream's stderr) goes through this before it is logged. */
export { redactLogText };

/**
 * All logs go to stderr: stdout is the protocol channel in stdio mode. Credentials never
 * reach a log line: auth headers and secret-looking keys are redacted at the source.
 */
/**
 * Errors are logged as type, message and code, never with their stack: a stack names internal
 * files and can carry request data. SWITCHYARD_LOG_STACKS=1 brings stacks back for debugging.
 */
function errSerializer(e: unknown): unknown {
  if (!(e instanceof Error)) return e;
  // A message may quote what an upstream or a URL said, credentials included.
  const out: Record<string, unknown> = { type: e.name, message: clip(redactLogText(e.message)) };
  const code = (e as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (process.env.SWITCHYARD_LOG_STACKS === '1') out.stack = e.stack;
  return out;
}

/**
 * The longest string a log line carries, as an upstream's stderr line (stdio-child.ts). Some
 * logged values are a client's (the id of a malformed response it sent): unbounded, one 4 MiB
 * request made one 4 MiB line, as often as the client liked.
 */
export const MAX_LOGGED_CHARS = 4096;

/** `s` cut to MAX_LOGGED_CHARS, saying how much was left out; the config's secrets go first, so a cut never leaves half of one. */
function clip(s: string): string {
  if (s.length <= MAX_LOGGED_CHARS) return s;
  const r = redactConfigSecrets(s);
  return r.length <= MAX_LOGGED_CHARS ? r : `${r.slice(0, MAX_LOGGED_CHARS)}…[${r.length - MAX_LOGGED_CHARS} more chars]`;
}

/**
 * A string of a log object as it is written: redacted as log text (redactLogText), then cut.
 * Every call site's strings, not only the `err` serializer's: a line that logs an error as
 * `err: String(e)` or `e.message` (a list that failed quoting what its upstream answered) went
 * out with only the config's own values redacted (the streamWrite hook), `password=…` whole.
 * Redacted before the cut, so a cut never leaves the first part of a credential. A text with
 * no credential's mark costs one search (the rules' gate).
 */
function logged(s: string): string {
  return clip(redactLogText(s));
}

/** A log object with its strings redacted and the long ones clipped, a few levels down; the object itself when nothing changes. */
function clipStrings(v: unknown, depth: number): unknown {
  if (typeof v === 'string') return logged(v);
  if (depth === 0 || v === null || typeof v !== 'object' || v instanceof Error) return v;
  if (Array.isArray(v)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < v.length; i++) {
      const c = clipStrings(v[i], depth - 1);
      if (c !== v[i]) (copy ??= v.slice())[i] = c;
    }
    return copy ?? v;
  }
  let copy: Record<string, unknown> | undefined;
  for (const k of Object.keys(v)) {
    const x = (v as Record<string, unknown>)[k];
    const c = clipStrings(x, depth - 1);
    if (c !== x) (copy ??= { ...(v as Record<string, unknown>) })[k] = c;
  }
  return copy ?? v;
}

export function createLogger(level: string = process.env.SWITCHYARD_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      level,
      base: { name: 'switchyard' },
      serializers: { err: errSerializer, error: errSerializer },
      formatters: { log: (o) => clipStrings(o, 4) as Record<string, unknown> },
      // Last, on each line as written: the config's own secret values, wherever in the line
      // (policy/config-secrets.ts); nothing to do while the config has none.
      hooks: { streamWrite: redactConfigSecretsInJson },
      redact: {
        paths: [
          'headers.authorization',
          'headers["mcp-session-id"]',
          'headers["x-api-key"]',
          'headers.cookie',
          '*.headers.authorization',
          '*.headers["x-api-key"]',
          '*.headers.cookie',
          '*.authorization',
          '*.token',
          '*.apiKey',
          '*.password',
          '*.secret',
          // auth: bearer tokens, per-principal upstream credentials, OAuth secrets
          'authorization',
          'token',
          'credentials',
          '*.credentials',
          '*.accessToken',
          '*.access_token',
          '*.refresh_token',
          '*.client_secret',
          '*.clientSecret',
        ],
        censor: '[redacted]',
      },
    },
    logDestination(),
  );
}

/** Log lines held in memory while stderr cannot take them; past this they are dropped. */
const LOG_BUFFER_MAX = 16 * 1024 * 1024;

/** How long the last flush at exit waits for a stderr that takes nothing (a reader that stopped reading). */
const EXIT_FLUSH_MS = 2_000;
/** The fs sonic-boom writes through: the module object itself, so a property set here is the one it calls. */
const fsModule = createRequire(import.meta.url)('node:fs') as typeof import('node:fs');

/**
 * stderr, written asynchronously. A destination that fails (stderr redirected to a file on a
 * full disk, a reader that went away or stopped reading) must neither crash the hub nor hang
 * it. Without a listener sonic-boom's 'error' is an uncaught exception. Its flushSync, which
 * pino calls at exit, retries a failing write forever (sonic-boom 4: EPIPE too, not only
 * EAGAIN), so the hub would never exit once its log reader is gone; here that last flush drops
 * what cannot be written, and gives a full pipe EXIT_FLUSH_MS. While async writes fail, lines
 * wait in memory (bounded) and flushSync does nothing; the next write that succeeds ends that
 * state.
 */
export function logDestination(fd = 2): ReturnType<typeof pino.destination> {
  const dest = pino.destination({ fd, sync: false, maxLength: LOG_BUFFER_MAX });
  let failing = false;
  dest.on('error', () => (failing = true));
  dest.on('write', () => (failing = false));
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => {
    if (failing) return;
    const writeSync = fsModule.writeSync;
    // The monotonic clock: a wall clock stepped back kept the exit waiting on a full pipe past EXIT_FLUSH_MS.
    const deadline = monotonicNow() + EXIT_FLUSH_MS;
    // For this call only: a write that fails for good counts as written (its bytes are dropped),
    // so sonic-boom's loop ends; a full pipe is retried until the deadline.
    fsModule.writeSync = ((target: number, data: string | NodeJS.ArrayBufferView, ...rest: unknown[]) => {
      try {
        return (writeSync as (...a: unknown[]) => number)(target, data, ...rest);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (target !== fd || ((code === 'EAGAIN' || code === 'EBUSY') && monotonicNow() < deadline)) throw err;
        failing = true;
        return typeof data === 'string' ? Buffer.byteLength(data, typeof rest[0] === 'string' ? (rest[0] as BufferEncoding) : 'utf8') : data.byteLength;
      }
    }) as typeof writeSync;
    try {
      flushSync();
    } catch {
      // sonic-boom 5 throws what it will not retry: the lines are lost either way
    } finally {
      fsModule.writeSync = writeSync;
    }
  };
  return dest;
}

/**
 * In a serving process stdout is the protocol channel (`stdio`) or promised quiet (`start`): a
 * plugin's or a library's console.log, info, debug, dir or table goes to stderr instead.
 */
export function consoleToStderr(): void {
  Object.defineProperty(globalThis, 'console', { value: new Console(process.stderr, process.stderr), configurable: true, writable: true });
}

/** What `switchyard stdio` writes its frames to. */
export type ProtocolOut = Pick<NodeJS.WriteStream, 'write' | 'on' | 'writableLength'>;

/**
 * stdout for the protocol alone (`switchyard stdio`): `process.stdout.write` itself is pointed
 * at stderr, so that a plugin's `process.stdout.write`, or a console it made or imported from
 * `node:console` before `consoleToStderr`, cannot put a line into the client's JSON-RPC stream.
 * The frames go through the write function taken here.
 */
export function takeStdout(): ProtocolOut {
  const out = process.stdout;
  const write = out.write.bind(out) as NodeJS.WriteStream['write'];
  out.write = process.stderr.write.bind(process.stderr) as NodeJS.WriteStream['write'];
  return {
    write,
    on: out.on.bind(out),
    get writableLength() {
      return out.writableLength;
    },
  };
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
