/**
 * What tells the primary to reload or stop: SIGHUP reloads every service in every worker;
 * SIGTERM / SIGINT drain every worker and stop (a second signal exits at once); with `--watch`,
 * a change to a service's config (or a file in its directory) reloads that service everywhere.
 */
import type { Logger } from 'pino';
import { type ConfigWatcher, watchConfig } from '../service/watch.ts';

export interface Controlled {
  reloadAll(): Promise<unknown>;
  close(): Promise<void>;
  /** True once a stop began. */
  readonly stopping: boolean;
}

/** SIGHUP reloads every worker; SIGTERM/SIGINT drain them and stop (a second signal exits at once). */
export function handlePrimarySignals(primary: Controlled, exit: (code: number) => void): void {
  process.on('SIGHUP', () => {
    void primary.reloadAll();
  });
  const stop = () => {
    if (primary.stopping) return exit(1);
    void primary.close().then(() => exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

/** Watches each service's config file and reloads that service (`reload(i)`) when it changes. */
export function watchConfigs(
  files: string[],
  name: (i: number) => string | undefined,
  reload: (i: number) => unknown,
  logger: Logger,
): ConfigWatcher[] {
  return files.map((file, i) =>
    watchConfig(
      file,
      (changed) => {
        logger.info({ service: name(i), changed }, 'config change seen: reloading every worker');
        void reload(i);
      },
      { onError: (err) => logger.warn({ err }, 'config watch failed; reload by SIGHUP or the admin API') },
    ),
  );
}
