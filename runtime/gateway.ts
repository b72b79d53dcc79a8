/**
 * A gateway process: one or more services, each from its own config file. SIGHUP reloads every
 * service; SIGTERM / SIGINT drain in-flight requests and stop. With `watch`, a service is also
 * reloaded when its config (or a file in its directory) changes. For several processes on one
 * host, see runtime/cluster.ts (`serve --workers N`), whose workers each run a Gateway.
 */
import type { ConnectionSource } from './server/listener.ts';
import type { ReloadOutcome, ServiceRuntime, ServiceRuntimeOptions } from './service/runtime.ts';
import { ServiceRuntime as Runtime } from './service/runtime.ts';
import { type ConfigWatcher, watchConfig } from './service/watch.ts';

export interface GatewayOptions extends Omit<ServiceRuntimeOptions, 'acceptFrom'> {
  /** Reload a service when its config file or a file in its directory changes. */
  watch?: boolean;
  /** Per service (in file order): where its main listener's connections come from (cluster workers). */
  acceptFrom?: ConnectionSource[];
}

export class Gateway {
  private watchers: ConfigWatcher[] = [];
  private closing: Promise<void> | undefined;

  private constructor(readonly services: ServiceRuntime[]) {}

  static async start(files: string[], options: GatewayOptions = {}): Promise<Gateway> {
    const { watch, acceptFrom, ...runtimeOptions } = options;
    // In parallel: one slow service (a model to load, an upstream to probe) delays no other.
    const started = await Promise.allSettled(
      files.map((file, i) => Runtime.start(file, { ...runtimeOptions, acceptFrom: acceptFrom?.[i] })),
    );
    const services = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) {
      await Promise.allSettled(services.map((s) => s.close()));
      throw failed.reason;
    }
    const gateway = new Gateway(services);
    if (watch) gateway.watch();
    return gateway;
  }

  private watch(): void {
    for (const service of this.services) {
      const watcher = watchConfig(
        service.file,
        (changed) => {
          service.logger.info({ changed }, 'config change seen: reloading');
          void service.reload();
        },
        { onError: (err) => service.logger.warn({ err }, 'config watch failed; reload by SIGHUP or the admin API') },
      );
      this.watchers.push(watcher);
      service.logger.info({ file: service.file, mode: watcher.mode }, 'watching the config for changes');
    }
  }

  reloadAll(): Promise<ReloadOutcome[]> {
    return Promise.all(this.services.map((s) => s.reload()));
  }

  /** True once close() was called. */
  get stopping(): boolean {
    return this.closing !== undefined;
  }

  /** Drains and stops every service; later calls return the same promise. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      for (const w of this.watchers) w.close();
      await Promise.allSettled(this.services.map((s) => s.close()));
    })();
    return this.closing;
  }

  /**
   * Wires SIGHUP to reload and SIGTERM/SIGINT to a graceful stop (a second signal exits at once).
   * Only signals count: a cluster worker told to stop by its primary, then reached by the same
   * SIGTERM sent to the whole process group (systemd, Ctrl-C), keeps draining instead of exiting.
   */
  handleSignals(exit: (code: number) => void = process.exit): void {
    process.on('SIGHUP', () => {
      void this.reloadAll();
    });
    let signalled = false;
    const stop = () => {
      if (signalled) return exit(1);
      signalled = true;
      void this.close().then(() => exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }
}
