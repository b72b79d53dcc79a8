import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadService } from '../../runtime/config/load.ts';

// A settings file in the operator's vocabulary feeding an ordinary service template.
function setup(settings: string, schema = true) {
  const dir = mkdtempSync(join(tmpdir(), 'sy-settings-'));
  mkdirSync(join(dir, 'svc'));
  writeFileSync(
    join(dir, 'svc.toml'),
    `[switchyard]\ntemplate = "./svc/service.yaml"\nenv_prefix = "DB"\n\n${settings}`,
  );
  writeFileSync(
    join(dir, 'svc', 'service.yaml'),
    `service: settings-demo
${
  schema
    ? `settings:
  type: object
  additionalProperties: false
  properties:
    server:
      type: object
      additionalProperties: false
      properties:
        host: { type: string, default: 127.0.0.1 }
        port: { type: integer, minimum: 0, maximum: 65535, default: 8080 }
    logging:
      type: object
      additionalProperties: false
      properties:
        level: { enum: [trace, debug, info, warn, error], default: info }
        slow_query:
          type: object
          properties: { threshold_ms: { type: integer, default: 100 } }
          default: {}
      default: {}
`
    : ''
}listen: { host: "\${DB_SERVER_HOST}", port: "\${DB_SERVER_PORT}" }
logging: { level: "\${DB_LOGGING_LEVEL:-info}" }
routes:
  - match: { method: GET, path: /t }
    pipeline:
      - respond: { body: { threshold: "\${DB_LOGGING_SLOW_QUERY_THRESHOLD_MS:-none}" } }
`,
  );
  return join(dir, 'svc.toml');
}

describe('settings files', () => {
  it('turns sections into <PREFIX>_<SECTION>_<KEY> variables of the template', async () => {
    const file = setup('[server]\nhost = "0.0.0.0"\nport = 8123\n\n[logging.slow_query]\nthreshold_ms = 250\n');
    const loaded = await loadService(file, { env: {} });
    expect(loaded.config.listen).toMatchObject({ host: '0.0.0.0', port: 8123 });
    expect(loaded.config.routes[0]?.pipeline[0]?.options).toMatchObject({ body: { threshold: '250' } });
    // Relative paths resolve against the settings file's directory, not the template's.
    expect(loaded.configDir).toBe(join(file, '..'));
  });

  it('lets the environment win over the file, and fills keys from the schema defaults', async () => {
    const file = setup('[server]\nport = 8123\n');
    const loaded = await loadService(file, { env: { DB_SERVER_PORT: '9001', DB_LOGGING_LEVEL: 'debug' } });
    expect(loaded.config.listen).toMatchObject({ host: '127.0.0.1', port: 9001 });
    expect(loaded.config.logging.level).toBe('debug');
    expect(loaded.config.routes[0]?.pipeline[0]?.options).toMatchObject({ body: { threshold: '100' } });
  });

  it('reports a wrong setting at its line in the settings file', async () => {
    const file = setup('[server]\nport = "eighty"\n\n[storage]\npth = "x"\n');
    const err = await loadService(file, { env: {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ file, line: 6, path: 'server.port', message: 'must be integer' }),
        expect.objectContaining({ file, line: 8, path: 'storage', message: 'unknown property' }),
      ]),
    );
  });

  it('reports a bad environment override by the setting it overrides', async () => {
    const file = setup('[server]\nport = 8123\n');
    const err = await loadService(file, { env: { DB_LOGGING_LEVEL: 'loud' } }).catch((e: unknown) => e);
    expect((err as ConfigError).problems[0]).toMatchObject({ path: 'logging.level' });
  });

  it('refuses `settings` in an ordinary service config', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-settings-'));
    const file = join(dir, 'plain.yaml');
    writeFileSync(
      file,
      'service: plain\nsettings: { type: object }\nlisten: { port: 0 }\nroutes: [{ match: { path: /x }, pipeline: [{ respond: {} }] }]\n',
    );
    const err = await loadService(file, { env: {} }).catch((e: unknown) => e);
    expect((err as ConfigError).problems[0]).toMatchObject({ path: 'settings', line: 2 });
  });
});
