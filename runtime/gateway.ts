/**
 * A gateway process: one or more services, each from its own config file. SIGHUP reloads every
 * service; SIGTERM / SIGINT drain in-flight requests and stop.
 */
import type { ReloadOutcome, ServiceRuntime, ServiceRuntimeOptions } from './service/runtime.ts';
import { ServiceRuntime as Runtime } from './service/runtime.ts';

export class Gateway {
  private constructor(readonly services: ServiceRuntime[]) {}

  static async start(files: string[], options: ServiceRuntimeOptions = {}): Promise<Gateway> {
    const services: ServiceRuntime[] = [];
    try {
      for (const file of files) services.push(await Runtime.start(file, options));
    } catch (err) {
      await Promise.allSettled(services.map((s) => s.close()));
      throw err;
    }
    return new Gateway(services);
  }

  reloadAll(): Promise<ReloadOutcome[]> {
    return Promise.all(this.services.map((s) => s.reload()));
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.services.map((s) => s.close()));
  }

  /** Wires SIGHUP to reload and SIGTERM/SIGINT to a graceful stop. */
  handleSignals(exit: (code: number) => void = process.exit): void {
    process.on('SIGHUP', () => {
      void this.reloadAll();
    });
    let stopping = false;
    const stop = () => {
      if (stopping) return exit(1);
      stopping = true;
      void this.close().then(() => exit(0));
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  }
}
