/**
 * A cluster worker: runs every service of the command line (main listeners only, their
 * connections handed over by the primary) and answers the primary's requests over IPC.
 */
import cluster from 'node:cluster';
import { handedConnections } from '../cluster-connections.ts';
import { Gateway } from '../gateway.ts';
import { describeResources } from '../service/graph.ts';
import type { ReloadOutcome } from '../service/reload.ts';
import { Calls, isMessage, type Message, mainPortsVariable, reply } from './ipc.ts';

/**
 * Runs in a forked worker: starts every service (main listeners only, shared by the cluster),
 * then answers the primary's requests. Resolves once serving; on a start failure it tells the
 * primary and rejects.
 */
export async function runWorker(files: string[], options: { set?: string[] }): Promise<Gateway> {
  const worker = cluster.worker;
  if (!worker || !process.send) throw new Error('runWorker runs in a cluster worker');
  const send = (m: Message) => {
    if (process.connected) process.send?.(m);
  };
  // The main listeners' connections, from the primary (listening before the gateway starts: the
  // primary sends some only after 'ready', but their messages must never meet no listener).
  const ports = JSON.parse(process.env[mainPortsVariable] ?? '[]') as number[];
  const handed = handedConnections(ports, send);
  const onConnectionMessage = (m: unknown, handle: unknown) => handed.receive(m, handle);
  process.on('message', onConnectionMessage);
  process.on('disconnect', () => handed.primaryGone());
  let gateway: Gateway;
  try {
    gateway = await Gateway.start(files, {
      set: options.set,
      listeners: 'main',
      worker: worker.id,
      acceptFrom: handed.sources,
    });
  } catch (err) {
    // Wait until the message is out: the caller exits right after.
    await new Promise<void>((resolve) => {
      const m: Message = { sy: 'failed', error: (err as Error).message };
      setTimeout(resolve, 1000).unref();
      process.send?.(m, undefined, {}, () => resolve());
    });
    throw err;
  }
  const calls = new Calls();

  // A reload asked on this worker (the reload-api stage) goes through the primary to every worker.
  for (const [i, service] of gateway.services.entries()) {
    service.info.reload = async () => {
      const outcome = (await calls.call(send, 'reload-all', i)) as ReloadOutcome;
      return {
        ok: outcome.ok,
        error: outcome.error,
        problems: outcome.problems,
        resources: describeResources(service.graph),
      };
    };
  }

  const stop = (code: number) => {
    if (gateway.stopping) return;
    void gateway.close().then(() => process.exit(code));
  };
  process.on('message', (m: unknown) => {
    if (!isMessage(m)) return;
    if (m.sy === 'reply') calls.settle(m);
    else if (m.sy === 'shutdown') stop(0);
    else if (m.sy === 'request') {
      const service = gateway.services[m.service];
      void reply(send, m.id, () => {
        if (!service) throw new Error(`no service #${m.service}`);
        switch (m.op) {
          case 'status':
            return { ...service.status(), worker_id: worker.id, pid: process.pid };
          case 'reload':
            return service.reload();
          case 'health':
            return service.health();
          case 'metrics':
            return service.metrics.registry.getMetricsAsJSON();
          default:
            throw new Error(`unknown request ${m.op}`);
        }
      });
    }
  });
  // The primary is gone: stop serving.
  process.on('disconnect', () => stop(0));
  gateway.handleSignals();
  send({ sy: 'ready', services: gateway.services.map((s) => ({ name: s.info.name, ports: { ...s.info.ports } })) });
  return gateway;
}
