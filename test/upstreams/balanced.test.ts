/**
 * An http upstream with several endpoints, behind a real service (proxy stage), against real
 * fixture servers that die, hang, answer 5xx or recover: requests keep succeeding while one
 * endpoint is healthy, ejections end on time, a request that reached an endpoint is never sent
 * again, a refused connection is retried elsewhere, a stream is never retried.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream } from '../../runtime/upstreams/types.ts';
import { sample } from '../helpers/prometheus.ts';
import { closeNow, freePort, listenLocal, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

type Mode = 'ok' | '503' | 'hang';

interface Fixture {
  url: string;
  mode: Mode;
  hits: number;
  /** Ends the held /slow requests. */
  release(): void;
  close(): void;
}

const opened: Array<{ close(): unknown }> = [];

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function fixture(name: string, mode: Mode = 'ok', port = 0): Promise<Fixture> {
  const held: ServerResponse[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.once('end', () => {
      f.hits++;
      if (req.url === '/sse') {
        // One event, then the connection dies: a stream cut after its first byte.
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-endpoint': name });
        res.write('data: one\n\n');
        setTimeout(() => res.socket?.destroy(), 20);
      } else if (req.url === '/slow') {
        held.push(res);
      } else if (f.mode === 'ok') {
        res.writeHead(200, { 'content-type': 'application/json', 'x-endpoint': name }).end('{"ok":true}');
      } else if (f.mode === '503') {
        res.writeHead(503, { 'content-type': 'application/json', 'x-endpoint': name }).end('{"error":"busy"}');
      } // hang: never answers
    });
  });
  const f: Fixture = {
    url: await listenLocal(server, port),
    mode,
    hits: 0,
    release: () => {
      for (const r of held.splice(0)) r.writeHead(200, { 'x-endpoint': name }).end('slow');
    },
    close: () => closeNow(server),
  };
  opened.push(f);
  return f;
}

async function service(upstream: string): Promise<StartedService> {
  const file = writeServiceFile(`service: balanced
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
upstreams:
  llm:
    kind: http
${upstream
  .trim()
  .split('\n')
  .map((l) => `    ${l}`)
  .join('\n')}
routes:
  - match: { method: [GET, POST], path: /:what }
    pipeline: [{ proxy: { upstream: llm } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

const endpoints = (...list: Array<string | { url: string; weight: number }>) =>
  `endpoints: [${list.map((e) => (typeof e === 'string' ? `{ url: "${e}" }` : `{ url: "${e.url}", weight: ${e.weight} }`)).join(', ')}]`;

async function get(svc: StartedService, path = '/ok') {
  const res = await fetch(`${svc.url}${path}`);
  const body = await res.text();
  return { status: res.status, endpoint: res.headers.get('x-endpoint'), body };
}

async function post(svc: StartedService, path = '/ok') {
  const res = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"order":"one"}',
  });
  await res.text();
  return res.status;
}

async function metrics(svc: StartedService): Promise<string> {
  return (await fetch(`${svc.metricsUrl}/metrics`)).text();
}

async function adminHealth(svc: StartedService) {
  const res = await fetch(`${svc.adminUrl}/admin/health`);
  return (await res.json()) as {
    checks: Record<string, { ok: boolean; detail?: { endpoints: Array<Record<string, unknown>> } }>;
  };
}

describe('several endpoints per upstream', () => {
  it('keeps answering while one endpoint is healthy: a dead one is skipped, a 5xx one ejected; health and metrics say which', async () => {
    const a = await fixture('a');
    const deadUrl = `http://127.0.0.1:${await freePort()}`;
    const c = await fixture('c', '503');
    const svc = await service(`${endpoints(a.url, deadUrl, c.url)}
timeout_ms: 1000
health_check: { interval_ms: 60000 }
outlier: { consecutive_failures: 2, base_ejection_ms: 60000 }`);
    const answers = [];
    for (let n = 0; n < 12; n++) answers.push(await get(svc));
    // C answered 503 twice (passed on: a 5xx answer is never retried), then was ejected.
    expect(answers.filter((r) => r.status !== 200).map((r) => r.status)).toEqual([503, 503]);
    expect(answers.slice(4).every((r) => r.status === 200 && r.endpoint === 'a')).toBe(true);
    expect(c.hits).toBe(2);

    const health = await adminHealth(svc);
    const llm = health.checks['upstream:llm'];
    expect(llm?.ok).toBe(true);
    expect(llm?.detail?.endpoints.map((e) => e.state)).toEqual(['up', 'down', 'ejected']);
    expect(llm?.detail?.endpoints[1]?.error).toBe('connection refused');
    expect(llm?.detail?.endpoints[2]).toMatchObject({ ejections: 1 });

    const text = await metrics(svc);
    const label = (u: string) => `{upstream="llm",endpoint="${u}/",service="balanced"}`;
    expect(sample(text, `switchyard_upstream_ejections_total${label(c.url)}`)).toBe(1);
    expect(sample(text, `switchyard_upstream_endpoint_up${label(a.url)}`)).toBe(1);
    expect(sample(text, `switchyard_upstream_endpoint_up${label(deadUrl)}`)).toBe(0);
    expect(sample(text, `switchyard_upstream_endpoint_up${label(c.url)}`)).toBe(0);
    expect(sample(text, `switchyard_upstream_endpoint_ejected${label(c.url)}`)).toBe(1);

    const status = (await (await fetch(`${svc.adminUrl}/admin/config`)).json()) as {
      upstreams: Array<{ name: string; connected: boolean; detail: { endpoints: unknown[] } }>;
    };
    expect(status.upstreams[0]).toMatchObject({ name: 'llm', connected: true });
    expect(status.upstreams[0]?.detail.endpoints).toHaveLength(3);
  });

  it('an ejected endpoint takes requests again once its ejection time is over, not before', async () => {
    const a = await fixture('a');
    const c = await fixture('c', '503');
    const svc = await service(`${endpoints(a.url, c.url)}
outlier: { consecutive_failures: 2, base_ejection_ms: 400 }`);
    // Timed from before the request that ejects c (not after its answer, which a loaded machine
    // delivers late), so that the bound below is a lower bound whatever the load.
    let ejectedAt = performance.now();
    while (c.hits < 2) {
      ejectedAt = performance.now();
      await get(svc);
    }
    c.mode = 'ok';
    for (let n = 0; n < 4; n++) expect((await get(svc)).endpoint).toBe('a');
    // The ejection is over when c is picked again.
    await until(async () => (await get(svc)).endpoint === 'c', 5000);
    expect(performance.now() - ejectedAt).toBeGreaterThanOrEqual(390);
    expect(c.hits).toBe(3);
  });

  it('an endpoint ejected for refusing connections returns early once the background probe reaches it again', async () => {
    const a = await fixture('a');
    const d = await fixture('d');
    const svc = await service(`${endpoints(a.url, d.url)}
health_check: { interval_ms: 1000 }
outlier: { consecutive_failures: 1, base_ejection_ms: 60000 }`);
    d.close();
    // Sent before the next probe: the request to d is refused (retried on a) and d is ejected.
    for (let n = 0; n < 2; n++) expect(await post(svc)).toBe(200);
    const states = async () => (await adminHealth(svc)).checks['upstream:llm']?.detail?.endpoints.map((e) => e.state);
    expect(await states()).toEqual(['up', 'ejected']);
    const back = await fixture('d2', 'ok', Number(new URL(d.url).port));
    // Long before its 60 s: the probe saw it down, then up.
    await until(async () => (await get(svc)).endpoint === 'd2', 5000);
    expect(await states()).toEqual(['up', 'up']);
    expect(back.hits).toBeGreaterThan(0);
  });

  it('when every endpoint fails and the share allows ejecting all, the least bad one still serves', async () => {
    const a = await fixture('a', '503');
    const b = await fixture('b', '503');
    const svc = await service(`${endpoints(a.url, b.url)}
outlier: { consecutive_failures: 1, base_ejection_ms: 60000, max_ejected_share: 1 }`);
    const statuses = [];
    for (let n = 0; n < 6; n++) statuses.push((await get(svc)).status);
    // The backends' own answers, not a gateway error: nobody is left out entirely.
    expect(statuses).toEqual([503, 503, 503, 503, 503, 503]);
    expect(a.hits + b.hits).toBe(6);
  });

  it('a POST that reached an endpoint (which answered 503, or hung) is never sent again', async () => {
    const a = await fixture('a', '503');
    const b = await fixture('b');
    const svc = await service(`${endpoints(a.url, b.url)}\ntimeout_ms: 300`);
    expect([await post(svc), await post(svc)].sort()).toEqual([200, 503]);
    expect([a.hits, b.hits]).toEqual([1, 1]);

    a.mode = 'hang';
    expect([await post(svc), await post(svc)].sort()).toEqual([200, 504]);
    expect([a.hits, b.hits]).toEqual([2, 2]);
    expect(sample(await metrics(svc), 'switchyard_upstream_retries_total')).toBeUndefined();
  });

  it.each([
    [2, [200, 200, 200, 200], 1],
    [1, [200, 200, 200, 502], 0],
  ])('a refused connection is retried on another endpoint (attempts: %i)', async (attempts, expected, retries) => {
    const a = await fixture('a');
    const d = await fixture('d');
    const svc = await service(`${endpoints(a.url, d.url)}
health_check: { interval_ms: 60000 }
retry: { attempts: ${attempts} }`);
    // D was up at the start (the probe saw it), then goes away: the next request to it is refused.
    d.close();
    const statuses = [];
    for (let n = 0; n < 4; n++) statuses.push(await post(svc));
    expect(statuses.sort()).toEqual(expected);
    expect(a.hits).toBe(attempts === 2 ? 4 : 3);
    expect(d.hits).toBe(0);
    const text = await metrics(svc);
    expect(
      sample(text, 'switchyard_upstream_retries_total{upstream="llm",reason="connect_failure",service="balanced"}') ??
        0,
    ).toBe(retries);
  });

  it('a streamed request body is not retried even on a refused connection (it cannot be sent again)', async () => {
    const d = await fixture('d');
    const a = await fixture('a');
    const upstream = createUpstream(
      'llm',
      { kind: 'http', endpoints: [{ url: d.url }, { url: a.url }], health_check: { interval_ms: 60000 } },
      { logger: silentLogger, configDir: process.cwd() },
    ) as HttpUpstream;
    opened.push(upstream);
    await upstream.checked?.(2000);
    d.close();
    // Round-robin starts with d: refused, and the stream is already consumed.
    const send = (body: Readable | Buffer) => upstream.forward({ method: 'POST', path: '/ok', headers: {}, body });
    await expect(send(Readable.from([Buffer.from('{"a":1}')]))).rejects.toMatchObject({ kind: 'upstream_error' });
    expect(a.hits).toBe(0);
    // a was not tried with the spent stream (undici would fail it with the first error, and a would look down).
    const states = (upstream.health().detail as { endpoints: Array<{ state: string; consecutive_failures: number }> })
      .endpoints;
    expect(states.map((e) => [e.state, e.consecutive_failures])).toEqual([
      ['down', 1],
      ['up', 0],
    ]);
    // d is now known down: a buffered body goes to a.
    const res = await send(Buffer.from('{"a":1}'));
    expect(res.status).toBe(200);
    await res.body.resume();
    expect(a.hits).toBe(1);
  });

  it('a stream cut after its first byte is never retried', async () => {
    const a = await fixture('a');
    const b = await fixture('b');
    const svc = await service(endpoints(a.url, b.url));
    for (const method of ['GET', 'POST']) {
      const before = a.hits + b.hits;
      const res = await fetch(`${svc.url}/sse`, { method, body: method === 'POST' ? '{}' : undefined });
      expect(res.status).toBe(200);
      await expect(res.text()).rejects.toThrow();
      expect(a.hits + b.hits - before).toBe(1);
    }
    expect(sample(await metrics(svc), 'switchyard_upstream_retries_total')).toBeUndefined();
  });

  it('weights shape the round-robin distribution', async () => {
    const a = await fixture('a');
    const b = await fixture('b');
    const svc = await service(endpoints({ url: a.url, weight: 3 }, { url: b.url, weight: 1 }));
    const served = [];
    for (let n = 0; n < 8; n++) served.push((await get(svc)).endpoint);
    expect([a.hits, b.hits]).toEqual([6, 2]);
    expect(served.join('')).not.toContain('aaaa');
  });

  it('least-request sends new requests to the endpoint with fewer under way', async () => {
    const a = await fixture('a');
    const b = await fixture('b');
    const svc = await service(`${endpoints(a.url, b.url)}\nbalance: least-request`);
    const slow = get(svc, '/slow');
    await until(() => a.hits + b.hits === 1);
    const busy = a.hits === 1 ? 'a' : 'b';
    for (let n = 0; n < 5; n++) expect((await get(svc)).endpoint).not.toBe(busy);
    a.release();
    b.release();
    expect((await slow).endpoint).toBe(busy);
  });

  it('a misspelt balancing setting is a config error naming the field', async () => {
    await expect(service(`${endpoints('http://127.0.0.1:1')}\nbalance: round_robin`)).rejects.toThrow(/balance/);
    await expect(service(`url: "http://127.0.0.1:1"\n${endpoints('http://127.0.0.1:2')}`)).rejects.toThrow(/llm.url/);
  });
});
