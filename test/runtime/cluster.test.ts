/**
 * `switchyard serve --workers 2`, run as an operator runs it (a child process): both workers
 * answer, a reload (admin API, SIGHUP, or the reload-api stage on the main listener) reaches both,
 * /metrics adds up the workers, a killed worker comes back, a worker stopped alone hands over,
 * SIGTERM stops everything cleanly.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { get } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

const root = join(import.meta.dirname, '../..');
const probes = join(import.meta.dirname, 'fixtures/runtime-probes.ts');

function serviceYaml(ports: { main: number; metrics: number; admin: number }, label: string): string {
  return `service: cluster-test
listen: { port: ${ports.main} }
metrics: { port: ${ports.metrics} }
admin: { port: ${ports.admin} }
plugins: [${JSON.stringify(probes)}]
limits: { drain_timeout_ms: 3000, header_timeout_ms: 500 }
routes:
  - match: { method: GET, path: /who }
    pipeline: [{ whoami: { label: ${label} } }]
  - match: { method: POST, path: /reload }
    pipeline: [{ reload-api: {} }]
`;
}

interface Who {
  pid: number;
  worker: number;
  label: string;
}

/** GET on a new connection each time, so the cluster hands it to the next worker. */
function who(url: string): Promise<Who> {
  return new Promise((resolve, reject) => {
    get(`${url}/who`, { agent: false }, (res) => {
      let text = '';
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(text))));
    }).on('error', reject);
  });
}

interface Status {
  config_hash: string;
  cluster: { workers_ready: number };
  workers: Array<{ worker_id: number; pid: number; config_hash: string }>;
}

describe('serve --workers 2', () => {
  let child: ChildProcess;
  let file: string;
  let ports: { main: number; metrics: number; admin: number };
  let url: string;
  let admin: string;
  let stderr = '';

  const status = async (): Promise<Status> => (await fetch(`${admin}/admin/config`)).json() as Promise<Status>;
  const hashes = async () => (await status()).workers.map((w) => w.config_hash);

  beforeAll(async () => {
    ports = { main: await freePort(), metrics: await freePort(), admin: await freePort() };
    url = `http://127.0.0.1:${ports.main}`;
    admin = `http://127.0.0.1:${ports.admin}`;
    file = writeServiceFile(serviceYaml(ports, 'one'));
    child = spawn(process.execPath, [join(root, 'bin/switchyard.js'), 'serve', '--workers', '2', file], {
      cwd: root,
      env: { ...process.env, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.resume();
    child.stderr?.on('data', (d) => {
      stderr += d;
    });
    // Three processes each loading the runtime: 30 s was not enough on a loaded 2-core machine.
    await until(() => /\(2 workers\)/.test(stderr) || child.exitCode !== null, 90_000);
    expect(stderr).toMatch(/cluster-test: http:\/\/127\.0\.0\.1:\d+ {2}metrics :\d+ {2}admin :\d+ {2}\(2 workers\)/);
  }, 100_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await once(child, 'exit');
    }
  });

  it('both workers answer requests, round-robin', async () => {
    const answers = await Promise.all(Array.from({ length: 6 }, () => who(url)));
    expect(new Set(answers.map((a) => a.pid)).size).toBe(2);
    expect(answers.every((a) => a.label === 'one')).toBe(true);
    const s = await status();
    expect(s.cluster.workers_ready).toBe(2);
    expect(new Set(s.workers.map((w) => w.pid))).toEqual(new Set(answers.map((a) => a.pid)));
  });

  it('/metrics on the primary adds up every worker', async () => {
    const before = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    const count = (text: string) =>
      Number(
        /switchyard_requests_total\{route="GET \/who",method="GET",status="200",service="cluster-test"\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    await Promise.all(Array.from({ length: 4 }, () => who(url)));
    const after = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    expect(count(after) - count(before)).toBe(4);
    expect(after).toMatch(/switchyard_cluster_workers\{service="cluster-test"\} 2/);
  });

  it('POST /admin/reload reaches every worker; a bad config changes none', async () => {
    const [old] = await hashes();
    writeServiceFile(serviceYaml(ports, 'two'), join(file, '..'));
    const res = await fetch(`${admin}/admin/reload`, { method: 'POST' });
    expect(res.status).toBe(200);
    const out = (await res.json()) as {
      ok: boolean;
      changed: boolean;
      hash: string;
      workers: Array<{ ok: boolean; hash: string }>;
    };
    expect(out).toMatchObject({ status: 'reloaded', ok: true, changed: true });
    expect(out.workers.map((w) => [w.ok, w.hash])).toEqual([
      [true, out.hash],
      [true, out.hash],
    ]);
    expect(await hashes()).toEqual([out.hash, out.hash]);
    expect(out.hash).not.toBe(old);
    const answers = await Promise.all(Array.from({ length: 4 }, () => who(url)));
    expect(new Set(answers.map((a) => a.label))).toEqual(new Set(['two']));

    writeServiceFile(`${serviceYaml(ports, 'two')}bogus: 1\n`, join(file, '..'));
    const bad = await fetch(`${admin}/admin/reload`, { method: 'POST' });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toMatchObject({ ok: false, problems: [expect.objectContaining({ line: 12 })] });
    expect(await hashes()).toEqual([out.hash, out.hash]);
  });

  it('SIGHUP to the primary reloads every worker', async () => {
    const [old] = await hashes();
    writeServiceFile(serviceYaml(ports, 'three'), join(file, '..'));
    child.kill('SIGHUP');
    await until(async () => {
      const h = await hashes();
      return h.length === 2 && h.every((x) => x !== old) && h[0] === h[1];
    }, 10000);
    const answers = await Promise.all(Array.from({ length: 4 }, () => who(url)));
    expect(new Set(answers.map((a) => a.label))).toEqual(new Set(['three']));
  });

  it('a reload asked on the main listener (reload-api stage) reaches every worker', async () => {
    const [old] = await hashes();
    writeServiceFile(serviceYaml(ports, 'four'), join(file, '..'));
    const res = await fetch(`${url}/reload`, { method: 'POST', headers: { connection: 'close' } });
    expect(res.status).toBe(200);
    const h = await hashes();
    expect(h[0]).not.toBe(old);
    expect(h).toEqual([h[0], h[0]]);
  });

  it('a worker cuts slow headers after header_timeout_ms (408), as a single process does', async () => {
    // The primary accepts and passes connections on: the worker's server never listens itself,
    // and must still run Node's header deadline checks.
    const lifetimes = await Promise.all(
      [1, 2].map(
        () =>
          new Promise<{ ms: number; answer: string }>((resolve) => {
            const socket = connect(ports.main, '127.0.0.1');
            const opened = Date.now();
            let answer = '';
            socket.on('data', (d) => {
              answer += d;
            });
            socket.on('error', () => {});
            socket.on('close', () => resolve({ ms: Date.now() - opened, answer }));
            socket.write('GET /who HTTP/1.1\r\nHost: localhost\r\n'); // never finished
          }),
      ),
    );
    for (const { ms, answer } of lifetimes) {
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
      // Not before the bound; nothing timed above it: without the worker's own checks the 408
      // would come at Node's default pace (a minute) or never, after this test's timeout.
      expect(ms).toBeGreaterThanOrEqual(450);
    }
  });

  it('a worker that dies is forked again; the primary survives asking it meanwhile', async () => {
    const before = await status();
    const victim = before.workers[0]?.pid as number;
    // Status requests make the primary message every worker: one sent to the killed worker
    // before its exit is seen fails (EPIPE), which once took the primary down with the cluster.
    let asking = true;
    const askers = Array.from({ length: 16 }, async () => {
      let asked = 0;
      while (asking) {
        const res = await fetch(`${admin}/admin/config`);
        await res.arrayBuffer();
        asked++;
      }
      return asked;
    });
    await new Promise((r) => setTimeout(r, 50));
    process.kill(victim, 'SIGKILL');
    await new Promise((r) => setTimeout(r, 500));
    asking = false;
    expect((await Promise.all(askers)).every((n) => n > 0)).toBe(true);
    await until(async () => {
      const s = await status();
      return s.cluster.workers_ready === 2 && !s.workers.some((w) => w.pid === victim);
    }, 60_000); // waiting only: a fork took over 15 s on the loaded 2-core machine
    const answers = await Promise.all(Array.from({ length: 4 }, () => who(url)));
    expect(new Set(answers.map((a) => a.pid)).size).toBe(2);
    expect(new Set(answers.map((a) => a.label))).toEqual(new Set(['four']));
    const metrics = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_cluster_worker_restarts_total\{service="cluster-test"\} 1/);
  }, 90_000);

  it('a worker stopped alone (SIGTERM to its pid) drains and is replaced; clients are served throughout', async () => {
    const before = await status();
    const victim = before.workers[0]?.pid as number;
    let failures = 0;
    let served = 0;
    let stop = false;
    const load = (async () => {
      while (!stop) {
        await who(url).then(
          () => served++,
          () => failures++,
        );
      }
    })();
    await until(() => served > 0, 30_000);
    process.kill(victim, 'SIGTERM');
    await until(async () => {
      const s = await status();
      return s.cluster.workers_ready === 2 && !s.workers.some((w) => w.pid === victim);
    }, 60_000); // waiting only, as above
    // Served throughout: counted, so a slow machine waits for the answers instead of failing.
    const servedAtReplacement = served;
    await until(() => served > Math.max(10, servedAtReplacement), 30_000);
    stop = true;
    await load;
    expect(() => process.kill(victim, 0)).toThrow();
    expect(failures).toBe(0);
    expect(served).toBeGreaterThan(10);
  }, 150_000);

  it('SIGTERM drains every worker and exits 0', async () => {
    const pids = (await status()).workers.map((w) => w.pid);
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(code).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 15000);
});
