import { pino, type Logger } from 'pino';
import { redactLogText } from './policy/secret-text.js';

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
  const out: Record<string, unknown> = { type: e.name, message: redactLogText(e.message) };
  const code = (e as { code?: unknown }).code;
  if (code !== undefined) out.code = code;
  if (process.env.SWITCHYARD_LOG_STACKS === '1') out.stack = e.stack;
  return out;
}

export function createLogger(level: string = process.env.SWITCHYARD_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      level,
      base: { name: 'switchyard' },
      serializers: { err: errSerializer, error: errSerializer },
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
    stderrDestination(),
  );
}

/** Log lines held in memory while stderr cannot take them; past this they are dropped. */
const LOG_BUFFER_MAX = 16 * 1024 * 1024;

/**
 * stderr, written asynchronously. A destination that fails (stderr redirected to a file on a
 * full disk) must neither crash the hub nor hang it: without a listener sonic-boom's 'error'
 * is an uncaught exception, and its flushSync, which pino calls at exit, retries a failing
 * write forever. While writes fail, lines wait in memory (bounded) and flushSync does nothing;
 * the next write that succeeds ends that state.
 */
function stderrDestination(): ReturnType<typeof pino.destination> {
  const dest = pino.destination({ fd: 2, sync: false, maxLength: LOG_BUFFER_MAX });
  let failing = false;
  dest.on('error', () => (failing = true));
  dest.on('write', () => (failing = false));
  const flushSync = dest.flushSync.bind(dest);
  dest.flushSync = () => {
    if (!failing) flushSync();
  };
  return dest;
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
