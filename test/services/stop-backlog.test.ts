/**
 * SIGTERM while connections wait in the kernel's accept queue (issue 16). A client's connection is
 * established as soon as the kernel completes the handshake, before the service accepts it; the
 * client then sends its request. Node (libuv ≥ 1.45) accepts one connection per event-loop turn,
 * so on a busy service a burst of new connections waits there for hundreds of milliseconds. Closing
 * the listening socket resets every connection still queued (Linux), requests included: the stop
 * must accept and answer them first.
 *
 * Reproduced deterministically: the service is paused (SIGSTOP) while the clients connect and send,
 * then gets SIGTERM and SIGCONT, so the signal finds the whole burst in the queue.
 */
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FaultyUpstream, startFaultyUpstream } from '../helpers/faulty-upstream.ts';
import { RawConnection } from '../helpers/raw-http.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';

const clients = 12;

describe('SIGTERM with connections still in the accept queue', () => {
  let upstream: FaultyUpstream;
  let svc: ServiceProcess;
  beforeAll(async () => {
    upstream = await startFaultyUpstream();
    svc = await spawnService('configs/typed-proxy.yaml', {
      set: [`upstreams.everything={kind: jsonrpc, url: "${upstream.url}/mcp", timeout_ms: 30000}`],
    });
  }, 60_000);
  afterAll(async () => {
    if (svc?.child.exitCode === null) svc.child.kill('SIGCONT');
    await svc?.stop('SIGKILL');
    await upstream?.close();
  });

  it('every request sent on a connection established before the signal is answered, none reset', async () => {
    const pid = svc.child.pid as number;
    process.kill(pid, 'SIGSTOP');
    let exited: Promise<unknown[]> | undefined;
    let answers: Array<{ status?: number; connection?: string; error?: string }>;
    try {
      // Established by the kernel while the service cannot accept: all queued.
      const conns = await Promise.all(Array.from({ length: clients }, () => RawConnection.open(svc.port)));
      const pending = conns.map((c, i) =>
        c
          .post('/', {
            jsonrpc: '2.0',
            id: i,
            method: 'tools/call',
            params: { name: 'echo', arguments: { message: 'hi' } },
          })
          .then(
            (a) => ({ status: a.status, connection: a.headers.connection }),
            (err: Error) => ({ error: err.message }),
          ),
      );
      // Let the requests reach the kernel's buffers before the signal.
      await new Promise((r) => setTimeout(r, 200));
      exited = once(svc.child, 'exit');
      process.kill(pid, 'SIGTERM');
      process.kill(pid, 'SIGCONT');
      answers = await Promise.all(pending);
      for (const c of conns) c.close();
    } finally {
      if (svc.child.exitCode === null) svc.child.kill('SIGCONT');
    }
    expect((await exited)?.[0]).toBe(0);
    expect(answers.filter((a) => a.error)).toEqual([]);
    // Answered as any request during a stop: served, and told to close the connection.
    expect(answers.every((a) => a.status === 200 && a.connection === 'close')).toBe(true);
  }, 30_000);
});
