/**
 * The logger's options of a service: its `logging` section, with `file` against the config's
 * directory, and LOG_LEVEL / LOG_FORMAT from the environment over it.
 */
import { extname, resolve } from 'node:path';
import type { ServiceConfig } from '../config/types.ts';
import { LOG_FORMATS, type LogFormat, type LoggingOptions } from '../observability/logger.ts';

/**
 * The logger's options: `file` against the config's directory. A cluster worker that rotates its
 * file writes its own (`service-worker2.log`): several processes rotating one file would lose lines.
 */
export function loggingOptions(
  config: ServiceConfig['logging'],
  configDir: string,
  worker: number | undefined,
  env: Record<string, string | undefined> = process.env,
): LoggingOptions {
  const logging = { ...config, ...environmentLogging(env) };
  if (!logging.file) return { ...logging, file: undefined };
  let file = resolve(configDir, logging.file);
  if (worker !== undefined && logging.max_size_mb > 0) {
    const ext = extname(file);
    file = `${file.slice(0, file.length - ext.length)}-worker${worker}${ext}`;
  }
  return { ...logging, file };
}

/**
 * LOG_LEVEL and LOG_FORMAT, when set, apply to every service of the process over their files (one
 * switch for the whole stack, the datastore's TOML included). A value that is not one of the
 * choices stops the start rather than being ignored.
 */
function environmentLogging(env: Record<string, string | undefined>): Partial<ServiceConfig['logging']> {
  const out: Partial<ServiceConfig['logging']> = {};
  const level = env.LOG_LEVEL?.trim();
  if (level) {
    if (!LOG_LEVELS.includes(level))
      throw new Error(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, not "${level}"`);
    out.level = level as ServiceConfig['logging']['level'];
  }
  const format = env.LOG_FORMAT?.trim();
  if (format) {
    if (!(LOG_FORMATS as readonly string[]).includes(format)) {
      throw new Error(`LOG_FORMAT must be one of ${LOG_FORMATS.join(', ')}, not "${format}"`);
    }
    out.format = format as LogFormat;
  }
  return out;
}

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'silent'];
