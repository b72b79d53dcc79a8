/**
 * Public health answers say why an upstream is down, never where (issue 29, item 9): the typed
 * proxy's `/health` with every endpoint of a balanced upstream down (the case that listed the
 * URLs), with a single endpoint down, and the safety filter's `/health/ready` with its backend
 * down name no URL, address or port of an upstream. The admin listener's health still does.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { publicReason } from '../../runtime/util/public-reason.ts';
import { freePort } from '../helpers/servers.ts';

const dir = mkdtempSync(join(tmpdir(), 'health-urls-'));
const services: StartedService[] = [];

afterAll(async () => {
  for (const s of services) await s.close();
});

async function start(config: string, set: string[], env: Record<string, string>): Promise<StartedService> {
  const svc = await startService(config, { set, env, warmupMs: 500 });
  services.push(svc);
  return svc;
}

/** The body of a public answer, checked for every way of naming the endpoints. */
async function publicBody(url: string, ports: number[]): Promise<Record<string, unknown>> {
  const res = await fetch(url);
  expect(res.status).toBe(503);
  const text = await res.text();
  expect(text).not.toMatch(/https?:\/\//);
  expect(text).not.toContain('127.0.0.1');
  for (const p of ports) expect(text).not.toContain(String(p));
  return JSON.parse(text);
}

describe('public health names no upstream URL', () => {
  it('typed proxy, every endpoint of a balanced upstream down: /health says why, the admin health says where', async () => {
    const ports = [await freePort(), await freePort()];
    const urls = ports.map((p) => `http://127.0.0.1:${p}/mcp`);
    const svc = await start(
      'configs/typed-proxy.yaml',
      [
        `upstreams.everything={kind: jsonrpc, protocol: mcp, endpoints: [${urls.map((u) => `{url: "${u}"}`).join(', ')}], health_check: {interval_ms: 200}}`,
      ],
      { PROXY_AUDIT_PATH: join(dir, 'a.db') },
    );
    const body = await publicBody(`${svc.url}/health`, ports);
    expect(body).toMatchObject({
      status: 'unhealthy',
      upstream: 'disconnected',
      error: 'no endpoint takes requests: connection refused',
      endpoints: { total: 2, up: 0 },
    });
    const admin = await (await fetch(`${svc.adminUrl}/admin/health`)).json();
    const endpoints = admin.checks['upstream:everything'].detail.endpoints as Array<{ url: string }>;
    expect(endpoints.map((e) => e.url)).toEqual(urls);
  }, 90_000);

  it('typed proxy, its one endpoint down: /health says why only', async () => {
    const port = await freePort();
    const svc = await start(
      'configs/typed-proxy.yaml',
      [`upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:${port}/mcp", health_check: {interval_ms: 200}}`],
      { PROXY_AUDIT_PATH: join(dir, 'b.db') },
    );
    const body = await publicBody(`${svc.url}/health`, [port]);
    expect(body).toMatchObject({ status: 'unhealthy', upstream: 'disconnected', error: 'connection refused' });
  }, 90_000);

  it('safety filter, backend down: /health/ready names no address', async () => {
    const port = await freePort();
    const svc = await start('configs/safety-filter.yaml', [], {
      FILTER_BACKEND_URL: `http://127.0.0.1:${port}/v1`,
      FILTER_AUDIT_PATH: join(dir, 'c.db'),
    });
    const body = await publicBody(`${svc.url}/health/ready`, [port]);
    expect(body).toMatchObject({ status: 'not_ready', checks: { backend: 'unreachable' } });
  }, 90_000);
});

describe('publicReason', () => {
  it('replaces URLs, addresses and host:port pairs a library message may quote, and keeps the reason', () => {
    expect(publicReason('connect ECONNREFUSED 10.0.0.5:5432')).toBe('connect ECONNREFUSED <address>');
    expect(publicReason('request to https://api.internal.example/v1/models failed, reason: timeout')).toBe(
      'request to <url> failed, reason: timeout',
    );
    expect(publicReason('connect ECONNREFUSED [fd00::12]:8080')).toBe('connect ECONNREFUSED <address>');
    expect(publicReason('getaddrinfo ENOTFOUND db.internal:5432')).toBe('getaddrinfo ENOTFOUND <address>');
    expect(publicReason('child exited with code 1')).toBe('child exited with code 1');
    expect(publicReason('health check answered 503')).toBe('health check answered 503');
  });
});
