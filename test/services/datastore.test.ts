/**
 * configs/datastore.toml as an operator uses it: its documented defaults, environment overrides
 * (DB_<SECTION>_<KEY>), refused settings, and the metrics listener the [metrics] keys describe.
 * The entity API itself is covered by test/plugins/entity-api.test.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
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
    expect(config.metrics).toEqual({ host: '127.0.0.1', port: 9090, path: '/metrics' });
    expect(config.logging).toMatchObject({ level: 'info', format: 'json', file: '', max_size_mb: 100, max_files: 5 });
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
    ['DB_METRICS_ENABLED', 'false', 'metrics.enabled'],
    ['DB_STORAGE_SYNC_MODE', 'sometimes', 'storage.sync_mode'],
    ['DB_QUERY_MAX_ENTITIES', '0', 'query.max_entities'],
    ['DB_LOGGING_LEVEL', 'loud', 'logging.level'],
  ])('refuses %s=%s, naming the setting', async (name, value, setting) => {
    await expect(loadService(CONFIG, { env: { [name]: value } })).rejects.toThrow(setting);
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
});
