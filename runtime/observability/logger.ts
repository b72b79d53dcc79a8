/**
 * Structured logs with pino. Formats: `json` (one object a line), `pretty` (colourised, for a
 * terminal) and `compact` (one short line a record). Secrets and raw bodies are never logged:
 * the redact list covers the usual credential headers.
 */
import pino, { type Logger } from 'pino';

export type LogFormat = 'json' | 'pretty' | 'compact';

export interface LoggingOptions {
  level?: string;
  format?: LogFormat;
  /** Write to this file instead of stdout. */
  file?: string;
}

const redact = {
  paths: [
    'req.headers.authorization',
    'req.headers.cookie',
    'req.headers["x-proxy-token"]',
    'req.headers["x-api-key"]',
    'headers.authorization',
    'token',
    'apiKey',
  ],
  censor: '[redacted]',
};

/**
 * `base` fields (the service name) are written on every line. Do not bind them again with
 * `child()`: pino does not merge bindings, so the key would appear twice in one JSON line.
 */
export function createLogger(options: LoggingOptions = {}, base: Record<string, unknown> = {}): Logger {
  const level = options.level ?? process.env.LOG_LEVEL ?? 'info';
  const format = options.format ?? 'json';
  const destination = options.file ?? 1;
  if (format === 'json') {
    return pino(
      { level, base, redact, timestamp: pino.stdTimeFunctions.isoTime },
      pino.destination({ dest: destination, sync: false }),
    );
  }
  const transport = pino.transport({
    target: 'pino-pretty',
    options: {
      destination,
      colorize: format === 'pretty' && destination === 1,
      singleLine: format === 'compact',
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: format === 'compact' ? 'pid,hostname,service' : 'pid,hostname',
    },
  });
  return pino({ level, base, redact }, transport);
}

/** A logger that writes nothing, for tests and tools. */
export const silentLogger: Logger = pino({ level: 'silent' });
