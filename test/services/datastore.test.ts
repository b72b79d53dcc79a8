/**
 * configs/datastore.toml as an operator uses it: its documented defaults, environment overrides
 * (DB_<SECTION>_<KEY>), refused settings, and the metrics listener the [metrics] keys describe.
 * The entity API itself is covered by test/plugins/entity-api.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadService } from '../../runtime/config/load.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';

const CONFIG = 'configs/datastore.toml';
const TEMPLATE = resolve('configs/datastore/service.yaml');

describe('datastore settings', () => {
  it('has the documented defaults', async () => {
    const { config } = await loadService(CONFIG, { env: {} });
    expect(config.service).toBe('datastore');
    expect(config.listen).toMatchObject({ host: '127.0.0.1', port: 8080, tls: { cert: '', key: '' } });
    expect(config.metrics).toEqual({ enabled: true, host: '127.0.0.1', port: 9090, path: '/metrics' });
    expect(config.logging).toMatchObject({ level: 'info', format: 'auto', file: '', max_size_mb: 100, max_files: 5 });
    expect(config.resources.store).toMatchObject({
      type: 'entity-store',
      driver: 'sqlite',
      path: '../.data/datastore.db',
      cache_size_mb: 64,
      sync_mode: 'normal',
      max_entities: 10000,
      max_depth: 3,
      slow_query: { enabled: true, threshold_ms: 100, log_file: '' },
    });
    // Connection fairness and the Host/Origin check: the runtime's defaults, written out in the file.
    expect(config.limits).toMatchObject({
      max_connections: 1024,
      max_connections_per_client: 64,
      header_timeout_ms: 10000,
      body_idle_timeout_ms: 15000,
      max_upgraded_connections: 256,
    });
    expect(config.hosts).toEqual({ allow: [], origins: [] });
  });

  it('takes the connection limits and the accepted hosts from the file and the environment', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-settings-'));
    const file = join(dir, 'datastore.toml');
    writeFileSync(
      file,
      `[switchyard]\ntemplate = ${JSON.stringify(TEMPLATE)}\nenv_prefix = "DB"\n\n` +
        `[server]\nheader_timeout_ms = 2000\n\n[hosts]\nallow = ["db.example.com", "db2.example.com"]\norigins = ["https://app.example.com"]\n`,
    );
    const fromFile = (await loadService(file, { env: {} })).config;
    expect(fromFile.limits.header_timeout_ms).toBe(2000);
    expect(fromFile.hosts).toEqual({
      allow: ['db.example.com', 'db2.example.com'],
      origins: ['https://app.example.com'],
    });

    const fromEnv = (
      await loadService(file, {
        env: {
          DB_HOSTS_ALLOW: 'db3.example.com, db4.example.com',
          DB_SERVER_BODY_IDLE_TIMEOUT_MS: '5000',
          DB_SERVER_MAX_CONNECTIONS_PER_CLIENT: '8',
        },
      })
    ).config;
    expect(fromEnv.hosts.allow).toEqual(['db3.example.com', 'db4.example.com']);
    expect(fromEnv.limits).toMatchObject({ body_idle_timeout_ms: 5000, max_connections_per_client: 8 });
    // A wrong host name is refused, naming the setting.
    await expect(loadService(file, { env: { DB_HOSTS_ALLOW: 'http://x/' } })).rejects.toThrow('hosts.allow');
  });

  it('takes DB_<SECTION>_<KEY> from the environment over the file', async () => {
    const { config } = await loadService(CONFIG, {
      env: {
        DB_SERVER_PORT: '9000',
        DB_STORAGE_CACHE_SIZE_MB: '8',
        DB_QUERY_MAX_DEPTH: '5',
        DB_LOGGING_LEVEL: 'debug',
        DB_LOGGING_SLOW_QUERY_THRESHOLD_MS: '250',
        DB_METRICS_PATH: '/prom',
      },
    });
    expect(config.listen.port).toBe(9000);
    expect(config.resources.store).toMatchObject({ cache_size_mb: 8, max_depth: 5, slow_query: { threshold_ms: 250 } });
    expect(config.logging.level).toBe('debug');
    expect(config.metrics?.path).toBe('/prom');
  });

  it.each([
    ['DB_METRICS_ENABLED', 'sometimes', 'metrics.enabled'],
    ['DB_STORAGE_SYNC_MODE', 'sometimes', 'storage.sync_mode'],
    ['DB_QUERY_MAX_ENTITIES', '0', 'query.max_entities'],
    ['DB_LOGGING_LEVEL', 'loud', 'logging.level'],
    ['DB_SERVER_HEADER_TIMEOUT_MS', '10', 'server.header_timeout_ms'],
  ])('refuses %s=%s, naming the setting', async (name, value, setting) => {
    await expect(loadService(CONFIG, { env: { [name]: value } })).rejects.toThrow(setting);
  });

  it('switches the metrics listener off with DB_METRICS_ENABLED=false', async () => {
    const { config } = await loadService(CONFIG, { env: { DB_METRICS_ENABLED: 'false' } });
    expect(config.metrics?.enabled).toBe(false);
  });

  it('reports an unknown key at its line in the settings file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-settings-'));
    const file = join(dir, 'datastore.toml');
    writeFileSync(
      file,
      `[switchyard]\ntemplate = ${JSON.stringify(TEMPLATE)}\nenv_prefix = "DB"\n\n[storage]\ncache_size = 64\n`,
    );
    await expect(loadService(file, { env: {} })).rejects.toThrow(
      /datastore\.toml:6:\d+: storage\.cache_size: unknown property/,
    );
  });
});

describe('the running datastore', () => {
  let svc: StartedService;
  afterAll(() => svc?.close());

  it('serves metrics at metrics.path on the metrics port only', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-svc-'));
    svc = await startService(CONFIG, {
      env: {
        DB_SERVER_PORT: '0',
        DB_METRICS_PORT: '0',
        DB_METRICS_PATH: '/prom',
        DB_STORAGE_PATH: join(dir, 'data.db'),
      },
    });
    const res = await fetch(`${svc.metricsUrl}/prom`);
    expect(res.status).toBe(200);
    expect(await res.text()).toMatch(/^# TYPE db_query_total counter$/m);
    expect((await fetch(`${svc.metricsUrl}/metrics`)).status).toBe(404);
    expect((await fetch(`${svc.url}/prom`)).status).toBe(404);
  });

  it('starts no metrics listener with DB_METRICS_ENABLED=false', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-svc-'));
    const off = await startService(CONFIG, {
      env: { DB_SERVER_PORT: '0', DB_METRICS_ENABLED: 'false', DB_STORAGE_PATH: join(dir, 'data.db') },
    });
    try {
      expect(off.metricsUrl).toBeUndefined();
      expect((await fetch(`${off.url}/health`)).status).toBe(200);
    } finally {
      await off.close();
    }
  });

  it("exposes every metric of the seed's table with its type, valid for promtool", async () => {
    // Traffic first, so that labelled series exist: entities, a failed request, a query.
    await fetch(`${svc.url}/v1/entities/book`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ title: 'x' }),
    });
    await fetch(`${svc.url}/v1/entities/book?limit=5`);
    await fetch(`${svc.url}/v1/entities/book/999999`);
    // Storage and entity gauges come from a snapshot refreshed every few seconds.
    let text = '';
    for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
      text = await (await fetch(`${svc.metricsUrl}/prom`)).text();
      if (/^db_entity_count\{[^}]*entity_type="book"/m.test(text)) break;
    }
    const seed: Array<[string, string]> = [
      ['db_server_uptime_seconds', 'gauge'],
      ['db_server_connections_active', 'gauge'],
      ['db_server_connections_total', 'counter'],
      ['db_server_requests_total', 'counter'],
      ['db_server_request_duration_seconds', 'histogram'],
      ['db_query_total', 'counter'],
      ['db_query_duration_seconds', 'histogram'],
      ['db_query_rows_returned', 'histogram'],
      ['db_query_entities_scanned', 'histogram'],
      ['db_query_budget_exceeded_total', 'counter'],
      ['db_mutation_total', 'counter'],
      ['db_mutation_duration_seconds', 'histogram'],
      ['db_mutation_rows_affected', 'histogram'],
      ['db_mutation_conflicts_total', 'counter'],
      ['db_storage_size_bytes', 'gauge'],
      ['db_storage_index_size_bytes', 'gauge'],
      ['db_storage_wal_size_bytes', 'gauge'],
      ['db_storage_free_bytes', 'gauge'],
      ['db_storage_cache_hits_total', 'counter'],
      ['db_storage_cache_misses_total', 'counter'],
      ['db_storage_cache_hit_ratio', 'gauge'],
      ['db_entity_count', 'gauge'],
      ['db_entity_size_bytes', 'gauge'],
    ];
    // prom-client names a counter's family without `_total` in its TYPE line, as the text format allows.
    for (const [name, type] of seed) {
      const family = type === 'counter' ? name.replace(/_total$/, '') : name;
      expect(text, name).toMatch(new RegExp(`^# TYPE (${name}|${family}) ${type}$`, 'm'));
    }
    expect(text).toMatch(/^db_server_requests_total\{[^}]*status="error"[^}]*\} [1-9]/m);
    expect(text).toMatch(/^db_entity_count\{[^}]*entity_type="book"[^}]*\} 1$/m);

    // A real Prometheus parser and linter: Debian's `prometheus` package ships promtool.
    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    if (promtool.error) {
      if (process.env.CI === 'true') throw new Error(`promtool is required under CI: ${promtool.error.message}`);
      console.warn(`promtool not available (${promtool.error.message}): exposition not linted`);
      return;
    }
    // It parses the exposition (a format error is `error while linting: text format parsing
    // error`) and lints names. The lint findings allowed are the seed's own name (a gauge called
    // `db_entity_count`) and prom-client's default `nodejs_active_*_total` gauges.
    const output = `${promtool.stdout}${promtool.stderr}`;
    expect(output).not.toMatch(/error while linting|parsing error/);
    const findings = output.split('\n').filter(Boolean);
    const allowed =
      /^(db_entity_count non-histogram and non-summary metrics should not have "_count" suffix|nodejs_active_\w+_total non-counter metrics should not have "_total" suffix)$/;
    expect(findings.filter((line) => !allowed.test(line))).toEqual([]);
  });

  it('counts every failed request as db_server_requests_total{status="error"}, refused before routing included', async () => {
    const errors = async () => {
      const text = await (await fetch(`${svc.metricsUrl}/prom`)).text();
      return Number(/^db_server_requests_total\{[^}]*status="error"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const before = await errors();
    expect((await fetch(`${svc.url}/no/such/route`)).status).toBe(404);
    expect((await fetch(`${svc.url}/health`, { method: 'DELETE' })).status).toBe(405);
    const rebinding = await new Promise<number>((resolve, reject) => {
      const { port } = new URL(svc.url);
      request({ host: '127.0.0.1', port, path: '/health', headers: { host: 'evil.example.com' } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(rebinding).toBe(403);
    expect(await errors()).toBe(before + 3);
  });

  it('requires a bearer token on entity calls with DB_AUTH_ENABLED=true, not on probes or admin routes', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'datastore-auth-'));
    const secured = await startService(CONFIG, {
      env: {
        DB_SERVER_PORT: '0',
        DB_METRICS_ENABLED: 'false',
        DB_STORAGE_PATH: join(dir, 'data.db'),
        DB_AUTH_ENABLED: 'true',
        DB_AUTH_TOKEN: 'client-secret',
        DB_ADMIN_TOKEN: 'admin-secret',
      },
    });
    try {
      expect((await fetch(`${secured.url}/v1/entities/book`)).status).toBe(401);
      const bad = await fetch(`${secured.url}/v1/entities/book`, { headers: { authorization: 'Bearer nope' } });
      expect(bad.status).toBe(401);
      const ok = await fetch(`${secured.url}/v1/entities/book`, { headers: { authorization: 'Bearer client-secret' } });
      expect(ok.status).toBe(200);
      expect((await fetch(`${secured.url}/health`)).status).toBe(200);
      expect((await fetch(`${secured.url}/ready`)).status).toBe(200);
      const admin = await fetch(`${secured.url}/admin/status`, { headers: { 'x-admin-token': 'admin-secret' } });
      expect(admin.status).toBe(200);
    } finally {
      await secured.close();
    }
  });
});
