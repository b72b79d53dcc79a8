/**
 * Development credentials (`${VAR:~default}`, tenant keys in clear) work on loopback only: a
 * service with a listener bound beyond loopback refuses to start while one is in effect, and the
 * message names the variable to set.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { loadService } from '../../runtime/config/load.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';

const DATASTORE = 'configs/datastore.toml';
const FILTER = 'configs/safety-filter.yaml';
const started: StartedService[] = [];
afterAll(async () => {
  for (const s of started) await s.close();
});

describe('development credentials', () => {
  it('the datastore refuses dev-admin-token on 0.0.0.0, naming DB_ADMIN_TOKEN', async () => {
    await expect(loadService(DATASTORE, { env: { DB_SERVER_HOST: '0.0.0.0' } })).rejects.toThrow(
      /DB_ADMIN_TOKEN is not set: .*listen\.host 0\.0\.0\.0.*set DB_ADMIN_TOKEN/,
    );
    const { config } = await loadService(DATASTORE, { env: { DB_SERVER_HOST: '0.0.0.0', DB_ADMIN_TOKEN: 's3cret' } });
    expect(config.listen.host).toBe('0.0.0.0');
  });

  it('the datastore with client auth on refuses dev-admin-token too, naming DB_ADMIN_TOKEN', async () => {
    await expect(
      loadService(DATASTORE, { env: { DB_AUTH_ENABLED: 'true', DB_AUTH_TOKEN: 'client-secret' } }),
    ).rejects.toThrow(/DB_ADMIN_TOKEN is not set: .*client authentication is on.*set DB_ADMIN_TOKEN/);
  });

  it('an exposed metrics listener counts as exposure too', async () => {
    await expect(loadService(DATASTORE, { env: { DB_METRICS_HOST: '0.0.0.0' } })).rejects.toThrow(
      /DB_ADMIN_TOKEN.*metrics\.host 0\.0\.0\.0/,
    );
  });

  it('the safety filter refuses dev-admin-token on 0.0.0.0, naming FILTER_ADMIN_TOKEN', async () => {
    await expect(loadService(FILTER, { env: { FILTER_HOST: '0.0.0.0' } })).rejects.toThrow(
      /FILTER_ADMIN_TOKEN is not set/,
    );
  });

  it('on loopback the development defaults still load (npm start)', async () => {
    for (const host of ['127.0.0.1', 'localhost', '::1']) {
      await expect(loadService(DATASTORE, { env: { DB_SERVER_HOST: host } })).resolves.toBeDefined();
    }
  });

  // The tenants fixture: initech's key is in clear.
  const TENANTS = 'test/fixtures/tenants/service.yaml';
  const env = { BACKEND_A_URL: 'http://127.0.0.1:9', BACKEND_B_URL: 'http://127.0.0.1:9' };
  // `{ env: VAR }` keys come from the process environment.
  process.env.TENANTS_TEST_GLOBEX_KEY ??= 'globex-test-key';

  it('tenant keys in clear refuse an exposed listener (before it binds)', async () => {
    await expect(startService(TENANTS, { env, set: ['listen.host=0.0.0.0'] })).rejects.toThrow(
      /tenant API keys in clear .*"initech".*beyond loopback/,
    );
  });

  it('tenant keys in clear still work on loopback', async () => {
    const s = await startService(TENANTS, { env });
    started.push(s);
    const ok = await fetch(`${s.url}/whoami`, { headers: { authorization: 'Bearer initech-dev-key' } });
    expect(ok.status).toBe(200);
  });
});
