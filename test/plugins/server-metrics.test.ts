import { join } from 'node:path';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadService } from '../../runtime/config/load.ts';
import { ConfigError } from '../../runtime/config/source.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { sample } from '../helpers/prometheus.ts';

const ops = join(import.meta.dirname, '../fixtures/ops.yaml');

describe('server-metrics', () => {
  let svc: StartedService;
  const scrape = async () => (await fetch(`${svc.metricsUrl}/metrics`)).text();

  beforeAll(async () => {
    svc = await startService(ops);
  });
  afterAll(() => svc?.close());

  it('counts requests as ok (< 400) or error (4xx, 5xx, thrown), with their duration', async () => {
    for (const path of ['/ok', '/ok', '/slow', '/conflict', '/broken', '/admin/status']) {
      await (await fetch(`${svc.url}${path}`)).arrayBuffer();
    }
    await (await fetch(`${svc.url}/not-routed`)).arrayBuffer(); // 404 before any pipeline: an error too
    const text = await scrape();
    expect(text).toContain('# TYPE db_server_requests_total counter');
    expect(sample(text, 'db_server_requests_total{status="ok"')).toBe(3);
    // 409, 503, the 401 that ops-api threw and the unrouted 404 (no duration: no pipeline timed it)
    expect(sample(text, 'db_server_requests_total{status="error"')).toBe(4);
    expect(text).toContain('# TYPE db_server_request_duration_seconds histogram');
    expect(sample(text, 'db_server_request_duration_seconds_count')).toBe(6);
    // /slow waits 600 ms
    expect(sample(text, 'db_server_request_duration_seconds_sum')).toBeGreaterThanOrEqual(0.6);
    expect(sample(text, 'db_server_request_duration_seconds_bucket{le="0.5"')).toBe(5);
  });

  it('reports uptime and the main listener connections', async () => {
    await (await fetch(`${svc.url}/ok`)).arrayBuffer(); // keep-alive: stays open
    const connections = svc.runtime.info.connections?.();
    const text = await scrape();
    expect(text).toContain('# TYPE db_server_uptime_seconds gauge');
    expect(sample(text, 'db_server_uptime_seconds')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE db_server_connections_active gauge');
    expect(sample(text, 'db_server_connections_active')).toBe(connections?.active);
    expect(connections?.active).toBeGreaterThanOrEqual(1);
    expect(text).toContain('# TYPE db_server_connections_total counter');
    const total = sample(text, 'db_server_connections_total') ?? 0;
    expect(total).toBe(connections?.total);

    // A new connection raises the counter at the next scrape.
    const fresh = new Agent();
    await (await fetch(`${svc.url}/ok`, { dispatcher: fresh })).arrayBuffer();
    await fresh.close();
    expect(sample(await scrape(), 'db_server_connections_total')).toBe(total + 1);
  });

  it('keeps its series across a reload', async () => {
    const before = sample(await scrape(), 'db_server_requests_total{status="ok"') ?? 0;
    expect((await svc.runtime.reload()).ok).toBe(true);
    await (await fetch(`${svc.url}/ok`)).arrayBuffer();
    expect(sample(await scrape(), 'db_server_requests_total{status="ok"')).toBe(before + 1);
  });

  it('refuses a prefix that is not a metric name', async () => {
    const err = await loadService(ops, { set: ['listen.port=0', 'pipeline.0.server-metrics.prefix=db-server'] })
      .then(() => undefined)
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems[0]?.path).toMatch(/server-metrics\.prefix/);
  });
});
