/**
 * Structured logs with pino. Formats: `json` (one object a line), `pretty` (colourised, one line a
 * record with its fields) and `compact` (one short line a record: a request is `METHOD path status
 * duration`); `auto` is `pretty` on a terminal and `json` otherwise. Every format names the service. Secrets and raw bodies are never logged:
 * the redact list covers the usual credential headers.
 *
 * A `json` record carries `timestamp` (ISO 8601), `level` (`trace` … `error`), `target` (the
 * component that wrote it, see `targetOf`), `message`, then the service's and the event's fields.
 * With `file` set, logs go to that file, rotated by size when `max_size_mb` is set: the current
 * file keeps its name, older ones are `<file>.1` (newest) … `<file>.<max_files>`.
 */
import { closeSync, createWriteStream, mkdirSync, openSync } from 'node:fs';
import { basename, dirname, sep } from 'node:path';
import type { Writable } from 'node:stream';
import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pinoPretty from 'pino-pretty';
import { createStream } from 'rotating-file-stream';

export type LogFormat = 'auto' | 'json' | 'pretty' | 'compact';
export const LOG_FORMATS: readonly LogFormat[] = ['auto', 'json', 'pretty', 'compact'];

export interface LoggingOptions {
  level?: string;
  format?: LogFormat;
  /** Write to this file instead of stdout (empty: stdout). Relative paths resolve against the cwd. */
  file?: string;
  /** Rotate `file` when it reaches this many MiB; 0 or absent: never. */
  max_size_mb?: number;
  /** Rotated files kept besides the current one (default 5). */
  max_files?: number;
}

const redact = {
  paths: [
    'req.headers.authorization',
    'req.headers.cookie',
    'req.headers["x-proxy-token"]',
    'req.headers["x-api-key"]',
    'req.headers["x-admin-token"]',
    'headers.authorization',
    'token',
    'apiKey',
  ],
  censor: '[redacted]',
};

/** Field names of a `json` record, as the operations docs give them. */
const jsonFields: LoggerOptions = {
  messageKey: 'message',
  timestamp: () => `,"timestamp":"${new Date().toISOString()}"`,
  formatters: { level: (label) => ({ level: label }) },
};

/**
 * The component a logger writes for, from its bindings: an explicit `target` wins (nothing is
 * added then); a stage's logger gives its plugin (`entity-api`), a resource's `resource:<name>`,
 * an upstream's `upstream:<name>`; the service's own logger `runtime`. The request core's logger
 * is bound to `target: "http"` by the service runtime.
 */
export function targetOf(bindings: Record<string, unknown>): string | undefined {
  if (typeof bindings.target === 'string') return undefined;
  if (typeof bindings.stage === 'string') {
    // Stage ids are `<route id>:<plugin>`, with `.2`, `.3`… for repeats; plugin names have no ':'.
    return bindings.stage.slice(bindings.stage.lastIndexOf(':') + 1).replace(/\.\d+$/, '');
  }
  if (typeof bindings.resource === 'string') return `resource:${bindings.resource}`;
  if (typeof bindings.upstream === 'string') return `upstream:${bindings.upstream}`;
  return 'runtime';
}

// Computed once per logger instance (parsing bindings on every line would be wasteful).
const targets = new WeakMap<object, string | null>();

function targetMixin(_record: object, _level: number, logger: Logger): Record<string, unknown> {
  let target = targets.get(logger);
  if (target === undefined) {
    target = targetOf(logger.bindings()) ?? null;
    targets.set(logger, target);
  }
  // A fresh object: pino merges the record's own fields into it.
  return target === null ? {} : { target };
}

/** File streams of the loggers made here, to wait for before the process exits. */
const fileStreams = new WeakMap<Logger, Writable[]>();

/**
 * `base` fields (the service name) are written on every line. Do not bind them again with
 * `child()`: pino does not merge bindings, so the key would appear twice in one JSON line.
 */
export function createLogger(options: LoggingOptions = {}, base: Record<string, unknown> = {}): Logger {
  const level = options.level ?? process.env.LOG_LEVEL ?? 'info';
  const file = options.file || undefined;
  const format = concreteFormat(options.format ?? 'auto', file);
  const common: LoggerOptions = { level, base, redact, mixin: targetMixin as LoggerOptions['mixin'] };
  if (file === undefined) {
    if (format === 'json') {
      return pino({ ...common, ...jsonFields }, pino.destination({ dest: 1, sync: false }));
    }
    // On a terminal the prettifier runs in a worker thread (pino transport).
    const transport = pino.transport({ target: 'pino-pretty', options: { ...prettyOptions(format), destination: 1 } });
    return pino({ ...common, timestamp: pino.stdTimeFunctions.isoTime }, transport);
  }

  const out = openFile(file, options);
  const streams: Writable[] = [out as Writable];
  let logger: Logger;
  if (format === 'json') {
    logger = pino({ ...common, ...jsonFields }, out);
  } else {
    const pretty = pinoPretty({ ...prettyOptions(format), colorize: false, destination: out });
    streams.unshift(pretty);
    logger = pino({ ...common, timestamp: pino.stdTimeFunctions.isoTime }, pretty);
  }
  fileStreams.set(logger, streams);
  return logger;
}

/** `auto`: pretty for a person at a terminal, json for a pipe, a file or a log collector. */
function concreteFormat(format: LogFormat, file: string | undefined): Exclude<LogFormat, 'auto'> {
  if (format !== 'auto') return format;
  return file === undefined && process.stdout.isTTY ? 'pretty' : 'json';
}

/** Fields of the access log record that compact spells as `METHOD path status duration`. */
const requestFields = 'request_id,method,path,route,status,duration_ms,caller';

function prettyOptions(format: 'pretty' | 'compact') {
  return {
    colorize: format === 'pretty',
    // One line a record in both: ~10 lines a request made a terminal unreadable under load.
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss.l',
    // The service and the component lead the message (seven services share one terminal).
    messageFormat:
      format === 'compact'
        ? '{service} {if target}{target}: {end}{msg}{if method} {method} {path} {status} {duration_ms}ms{end}'
        : '{service} {if target}{target}: {end}{msg}',
    ignore: format === 'compact' ? `pid,hostname,service,target,${requestFields}` : 'pid,hostname,service,target',
  };
}

/**
 * The log file as a stream: rotating by size when asked, else appended to. Opened once here so
 * that a path that cannot be written fails the start, not the first log line.
 */
function openFile(file: string, options: LoggingOptions): DestinationStream & Writable {
  try {
    mkdirSync(dirname(file), { recursive: true });
    closeSync(openSync(file, 'a'));
  } catch (err) {
    throw new Error(`cannot open log file ${file}: ${(err as Error).message}`);
  }
  const maxBytes = Math.round((options.max_size_mb ?? 0) * 1024 * 1024);
  // Classical rotation: <file> → <file>.1 → … → <file>.<max_files>, the oldest removed.
  const stream: Writable =
    maxBytes > 0
      ? createStream(basename(file), {
          path: `${dirname(file)}${sep}`,
          size: `${maxBytes}B`,
          rotate: options.max_files ?? 5,
        })
      : createWriteStream(file, { flags: 'a' });
  // A failing disk must not crash the service through an unhandled 'error' event.
  stream.on('error', (err) => process.stderr.write(`switchyard: log file ${file}: ${err.message}\n`));
  stream.on('warning', (err: Error) => process.stderr.write(`switchyard: log rotation of ${file}: ${err.message}\n`));
  return stream as DestinationStream & Writable;
}

/**
 * Waits (up to `timeoutMs`) until what was logged so far reached the log file, when the logger
 * writes to one: call it before the process exits so that the last lines are not lost. (On
 * stdout, pino's own flush.)
 */
export async function flushLogger(logger: Logger, timeoutMs = 2000): Promise<void> {
  const streams = fileStreams.get(logger);
  if (!streams) {
    logger.flush?.();
    return;
  }
  const end = Date.now() + timeoutMs;
  while (streams.some((s) => s.writableLength > 0 && !s.destroyed) && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A logger that writes nothing, for tests and tools. */
export const silentLogger: Logger = pino({ level: 'silent' });
