import { pino, type Logger } from 'pino';

export type { Logger };

/**
 * All logs go to stderr: stdout is the protocol channel in stdio mode. Credentials never
 * reach a log line: auth headers and secret-looking keys are redacted at the source.
 */
export function createLogger(level: string = process.env.SWITCHYARD_LOG_LEVEL ?? 'info'): Logger {
  return pino(
    {
      level,
      base: { name: 'switchyard' },
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
    pino.destination({ fd: 2, sync: false }),
  );
}

/** A logger that drops everything, for library use and tests. */
export const silentLogger: Logger = pino({ level: 'silent' });
