/**
 * Active health checks of a balanced upstream's endpoints, through a real service against
 * fixture servers whose /health answer flips: an endpoint failing its checks in a row is marked
 * down and no longer picked, requests keep succeeding on the others, and it returns once its
 * checks pass in a row, even from an ejection far from over. Health output and metrics say so.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { sample } from '../helpers/prometheus.ts';
import { closeNow, listenLocal, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

interface Fixture {
  url: string;
  name: string;
  /** What GET /health answers. */
  healthStatus: number;
  /** What other requests answer. */
  status: number;
  hits: number;
  checks: number;
  close(): void;
}

const opened: Array<{ close(): unknown }> = [];

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function fixture(name: string): Promise<Fixture> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.once('end', () => {
      if (req.url === '/health') {
        f.checks++;
        res.writeHead(f.healthStatus).end();
        return;
      }
      f.hits++;
      res.writeHead(f.status, { 'content-type': 'application/json', 'x-endpoint': name }).end('{}');
    });
  });
  const f: Fixture = {
    url: await listenLocal(server),
    name,
    healthStatus: 200,
    status: 200,
    hits: 0,
    checks: 0,
    close: () => closeNow(server),
  };
  opened.push(f);
  return f;
}

async function service(...fixtures: Fixture[]): Promise<StartedService> {
  const file = writeServiceFile(`service: checked
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
upstreams:
  api:
    kind: http
    endpoints: [${fixtures.map((f) => `{ url: "${f.url}" }`).join(', ')}]
    health_check: { interval_ms: 100, path: /health, expect_status: [200], timeout_ms: 500, unhealthy_threshold: 2, healthy_threshold: 3 }
    outlier: { consecutive_failures: 2, base_ejection_ms: 60000 }
routes:
  - match: { method: GET, path: /health }
    pipeline: [{ health: { upstream: api } }]
  - match: { method: GET, path: /:what }
    pipeline: [{ proxy: { upstream: api } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

interface EndpointHealth {
  state: string;
  check: { kind: string; healthy?: boolean; passes: number; failures: number; last_error?: string };
}

async function endpoints(svc: StartedService): Promise<EndpointHealth[]> {
  const res = await fetch(`${svc.adminUrl}/admin/health`);
  const body = (await res.json()) as { checks: Record<string, { detail?: { endpoints: EndpointHealth[] } }> };
  return body.checks['upstream:api']?.detail?.endpoints ?? [];
}

async function get(svc: StartedService) {
  const res = await fetch(`${svc.url}/work`);
  await res.text();
  return { status: res.status, endpoint: res.headers.get('x-endpoint') };
}

describe('active health checks', () => {
  it('an endpoint failing its checks is not picked while requests keep succeeding, and returns after its checks pass', async () => {
    const a = await fixture('a');
    const b = await fixture('b');
    const svc = await service(a, b);
    await until(async () => (await endpoints(svc)).every((e) => e.state === 'up'));

    // b still answers requests, but its health check says 503: after two checks in a row it is down.
    b.healthStatus = 503;
    await until(async () => (await endpoints(svc))[1]?.state === 'down', 5000);
    const down = (await endpoints(svc))[1];
    expect(down?.check).toMatchObject({ kind: 'http', healthy: false, last_error: 'health check answered 503' });
    expect(down?.check.failures).toBeGreaterThanOrEqual(2);
    const hitsBefore = b.hits;
    for (let n = 0; n < 10; n++) expect(await get(svc)).toEqual({ status: 200, endpoint: 'a' });
    expect(b.hits).toBe(hitsBefore);

    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    const label = (f: Fixture) => `{upstream="api",endpoint="${f.url}/",service="checked"}`;
    expect(sample(text, `switchyard_upstream_endpoint_check_healthy${label(b)}`)).toBe(0);
    expect(sample(text, `switchyard_upstream_endpoint_check_healthy${label(a)}`)).toBe(1);
    expect(sample(text, `switchyard_upstream_endpoint_up${label(b)}`)).toBe(0);
    const health = (await (await fetch(`${svc.url}/health`)).json()) as Record<string, unknown>;
    expect(health).toMatchObject({ status: 'healthy', endpoints: { total: 2, up: 1, down: 1, ejected: 0 } });

    // Healthy again: back only after three passes in a row, then picked again.
    const checksAtFlip = b.checks;
    b.healthStatus = 200;
    await until(async () => (await get(svc)).endpoint === 'b', 5000);
    expect(b.checks - checksAtFlip).toBeGreaterThanOrEqual(3);
    expect((await endpoints(svc))[1]?.check).toMatchObject({ healthy: true });
  });

  it('an endpoint ejected for its 5xx answers returns long before its ejection ends once its checks fail and then pass', async () => {
    const a = await fixture('a');
    const b = await fixture('b');
    const svc = await service(a, b);
    await until(async () => (await endpoints(svc)).every((e) => e.state === 'up'));

    // b breaks: its answers are 503 (two in a row eject it for 60 s), then its checks fail too.
    // In that order: failing checks first would take b out of the rotation (down after two checks,
    // 200 ms) before two of its answers could eject it, which a slow client on a busy machine
    // missed (issue 32).
    b.status = 503;
    await until(async () => (await get(svc)).status === 503 && (await endpoints(svc))[1]?.state === 'ejected', 5000);
    b.healthStatus = 503;
    for (let n = 0; n < 6; n++) expect(await get(svc)).toEqual({ status: 200, endpoint: 'a' });
    await until(async () => (await endpoints(svc))[1]?.check.healthy === false, 5000);

    // Fixed: its checks pass three times in a row, and it serves again (the 60 s are far from over).
    b.status = 200;
    b.healthStatus = 200;
    await until(async () => (await get(svc)).endpoint === 'b', 5000);
    expect((await endpoints(svc)).map((e) => e.state)).toEqual(['up', 'up']);
  });

  it('requests keep succeeding while at least one endpoint is healthy, whichever it is', async () => {
    const f = [await fixture('a'), await fixture('b'), await fixture('c')];
    const svc = await service(...f);
    await until(async () => (await endpoints(svc)).every((e) => e.state === 'up'));
    for (const healthy of [0, 1, 2]) {
      for (const [i, x] of f.entries()) x.healthStatus = i === healthy ? 200 : 503;
      const expected = f.map((_, i) => (i === healthy ? 'up' : 'down')).join();
      await until(async () => (await endpoints(svc)).map((e) => e.state).join() === expected, 5000);
      for (let n = 0; n < 6; n++) expect(await get(svc)).toEqual({ status: 200, endpoint: f[healthy]?.name });
    }
  });
});
