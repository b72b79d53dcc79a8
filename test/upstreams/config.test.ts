import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import proxyPlugin from '../../plugins/proxy/index.ts';
import { referenceKeyword } from '../../runtime/config/references.ts';
import { type StdioUpstreamConfig, stdioDefaults } from '../../runtime/upstreams/config.ts';
import { upstreamConfigSchema } from '../../runtime/upstreams/create.ts';

// Strict mode on purpose: it rejects defaults that ajv would silently ignore (e.g. inside oneOf).
const ajv = new Ajv2020({ allErrors: true, useDefaults: true, strict: true, allowUnionTypes: true });
ajv.addKeyword(referenceKeyword); // proxy's `upstream` option is marked `x-ref: upstream`
const validate = ajv.compile(upstreamConfigSchema);

function check(config: Record<string, unknown>) {
  const ok = validate(config);
  return { ok, config, errors: (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`) };
}

describe('upstream config schema', () => {
  it('applies the defaults of the branch its kind selects', () => {
    expect(check({ kind: 'stdio', command: 'node' }).config).toEqual({
      kind: 'stdio',
      command: 'node',
      protocol: 'mcp',
      call_timeout_ms: 30000,
      sessions: 'per-client',
      max_sessions: 16,
      session_idle_timeout_ms: 300000,
      spare_sessions: 0,
    });
    expect(check({ kind: 'jsonrpc', url: 'http://127.0.0.1:1/mcp', health_check: {} }).config).toEqual({
      kind: 'jsonrpc',
      url: 'http://127.0.0.1:1/mcp',
      connect_timeout_ms: 5000,
      timeout_ms: 30000,
      body_timeout_ms: 0,
      connections: 64,
      keep_alive_timeout_ms: 60000,
      health_check: { interval_ms: 2000, unhealthy_threshold: 1, healthy_threshold: 1 },
      protocol: 'jsonrpc',
    });
  });

  it('rejects a misspelt session mode or a cap below one, naming the field', () => {
    const misspelt = check({ kind: 'stdio', command: 'node', sessions: 'per_client' });
    expect(misspelt.ok).toBe(false);
    expect(misspelt.errors.join('\n')).toMatch(/\/sessions must be equal to one of the allowed values/);
    const cap = check({ kind: 'stdio', command: 'node', max_sessions: 0 });
    expect(cap.errors.join('\n')).toMatch(/\/max_sessions must be >= 1/);
    const idle = check({ kind: 'stdio', command: 'node', session_idle_timeout_ms: 'soon' });
    expect(idle.errors.join('\n')).toMatch(/\/session_idle_timeout_ms must be integer/);
    expect(check({ kind: 'stdio', command: 'node', sessions: 'shared', max_sessions: 2 }).ok).toBe(true);
  });

  it('max_sessions_per_client: at least one; default a quarter of max_sessions (at least one), at most all', () => {
    const zero = check({ kind: 'stdio', command: 'node', max_sessions_per_client: 0 });
    expect(zero.errors.join('\n')).toMatch(/\/max_sessions_per_client must be >= 1/);
    const share = (c: Partial<StdioUpstreamConfig>) =>
      stdioDefaults({ kind: 'stdio', command: 'node', ...c }).max_sessions_per_client;
    expect(share({})).toBe(4);
    expect(share({ max_sessions: 3 })).toBe(1);
    expect(share({ max_sessions: 40 })).toBe(10);
    expect(share({ max_sessions: 40, max_sessions_per_client: 7 })).toBe(7);
    expect(share({ max_sessions: 2, max_sessions_per_client: 5 })).toBe(2);
  });

  it('rejects unknown kinds, missing fields and fields of another kind', () => {
    expect(check({ kind: 'ftp', url: 'x' }).ok).toBe(false);
    expect(check({ kind: 'http' }).errors).toContain(" must have required property 'url'");
    expect(check({ kind: 'http', url: 'http://a', protocol: 'mcp' }).ok).toBe(false);
    expect(check({ kind: 'stdio', command: 'node', url: 'http://a' }).ok).toBe(false);
    expect(check({ kind: 'openai', url: 'ftp://a' }).ok).toBe(false);
  });

  it("takes an openai provider's key variable and model names; refuses them on http, naming the key", () => {
    const provider = {
      kind: 'openai',
      url: 'http://a/v1',
      api_key_env: 'OPENAI_API_KEY',
      model_map: { 'gpt-4o': 'x' },
    };
    expect(check(provider).errors).toEqual([]);
    expect(check({ ...provider, api_key_env: 'sk-not-a-name' }).errors.join('\n')).toMatch(/\/api_key_env must match/);
    expect(check({ ...provider, model_map: { 'gpt-4o': '' } }).ok).toBe(false);
    const http = check({ kind: 'http', url: 'http://a', api_key_env: 'KEY' });
    expect(http.ok).toBe(false);
    expect(http.errors.join('\n')).toMatch(/\/api_key_env/);
  });
});

describe('several endpoints of an http upstream', () => {
  const endpoints = [{ url: 'http://127.0.0.1:1/v1' }, { url: 'http://127.0.0.1:2/v1', weight: 3 }];

  it('accepts endpoints with balancing, outlier and retry settings; applies weight and sub-defaults only', () => {
    const c = check({ kind: 'openai', endpoints, balance: 'least-request', outlier: {}, retry: {} });
    expect(c.errors).toEqual([]);
    expect(c.config).toMatchObject({
      endpoints: [{ url: 'http://127.0.0.1:1/v1', weight: 1 }, { weight: 3 }],
      outlier: { consecutive_failures: 5, base_ejection_ms: 30000, max_ejection_ms: 300000, max_ejected_share: 0.5 },
      retry: { attempts: 2 },
    });
    // A single-url config stays as written (no balancing keys added).
    expect(check({ kind: 'http', url: 'http://a' }).config).not.toHaveProperty('balance');
  });

  it('rejects url together with endpoints, or neither', () => {
    expect(check({ kind: 'http', url: 'http://a', endpoints }).errors.join('\n')).toMatch(
      /\/url boolean schema is false/,
    );
    expect(check({ kind: 'http' }).errors.join('\n')).toMatch(/required property 'url'/);
    expect(check({ kind: 'http', endpoints: [] }).errors.join('\n')).toMatch(
      /\/endpoints must NOT have fewer than 1 items/,
    );
  });

  it('rejects misspelt values, naming the field', () => {
    const errors = (c: Record<string, unknown>) => check({ kind: 'http', endpoints, ...c }).errors.join('\n');
    expect(errors({ balance: 'round_robin' })).toMatch(/\/balance must be equal to one of the allowed values/);
    expect(errors({ outlier: { consecutive_failure: 3 } })).toMatch(/\/outlier must NOT have additional properties/);
    expect(errors({ outlier: { max_ejected_share: 1.5 } })).toMatch(/\/outlier\/max_ejected_share must be <= 1/);
    expect(errors({ retry: { attempts: 0 } })).toMatch(/\/retry\/attempts must be >= 1/);
    expect(errors({ retry: { tries: 2 } })).toMatch(/\/retry must NOT have additional properties/);
    expect(check({ kind: 'http', endpoints: [{ url: 'http://a', weight: 0 }] }).errors.join('\n')).toMatch(
      /\/endpoints\/0\/weight must be >= 1/,
    );
    expect(check({ kind: 'http', endpoints: [{ url: 'ftp://a' }] }).errors.join('\n')).toMatch(
      /\/endpoints\/0\/url must match/,
    );
  });

  it('balancing settings need endpoints; jsonrpc upstreams take endpoints too (sessions stick)', () => {
    expect(check({ kind: 'http', url: 'http://a', balance: 'round-robin' }).errors.join('\n')).toMatch(
      /must have property endpoints when property balance is present/,
    );
    expect(check({ kind: 'jsonrpc', endpoints, protocol: 'mcp' }).ok).toBe(true);
    expect(check({ kind: 'jsonrpc', endpoints, url: 'http://a' }).ok).toBe(false);
  });

  it('consistent-hash needs hash_on, and hash_on needs consistent-hash', () => {
    const hashed = { kind: 'jsonrpc', endpoints, balance: 'consistent-hash', hash_on: { header: 'Mcp-Session-Id' } };
    expect(check(hashed).ok).toBe(true);
    expect(check({ ...hashed, hash_on: undefined }).errors.join('\n')).toMatch(/required property 'hash_on'/);
    expect(
      check({ kind: 'http', endpoints, balance: 'round-robin', hash_on: { header: 'x' } }).errors.join('\n'),
    ).toMatch(/hash_on/);
    expect(check({ ...hashed, hash_on: { heder: 'x' } }).errors.join('\n')).toMatch(
      /\/hash_on must NOT have additional properties/,
    );
  });

  it('active checks: thresholds, a path or a JSON-RPC method (not both), statuses; typos named', () => {
    const hc = (health_check: Record<string, unknown>, kind = 'jsonrpc') =>
      check({ kind, url: 'http://a/mcp', health_check });
    expect(hc({ jsonrpc_method: 'ping', unhealthy_threshold: 3, healthy_threshold: 2, timeout_ms: 500 }).ok).toBe(true);
    expect(hc({ path: '/health', expect_status: [200, 204] }, 'http').ok).toBe(true);
    expect(hc({ path: '/health', jsonrpc_method: 'ping' }).errors.join('\n')).toMatch(/jsonrpc_method/);
    // A JSON-RPC method on an http upstream is a typo'd key there, named.
    expect(hc({ jsonrpc_method: 'ping' }, 'http').errors.join('\n')).toMatch(
      /\/health_check must NOT have additional properties/,
    );
    expect(hc({ unhealty_threshold: 3 }).errors.join('\n')).toMatch(
      /\/health_check must NOT have additional properties/,
    );
    expect(hc({ healthy_threshold: 0 }).ok).toBe(false);
  });
});

describe('proxy options schema', () => {
  const validateProxy = ajv.compile(proxyPlugin.options);
  it('defaults forward_headers, via, cooldown_ms, first_byte_timeout_ms and upstream_era, and rejects unknown options', () => {
    const options: Record<string, unknown> = { upstream: 'u' };
    expect(validateProxy(options)).toBe(true);
    expect(options).toEqual({
      upstream: 'u',
      forward_headers: [],
      via: 'auto',
      cooldown_ms: 30000,
      first_byte_timeout_ms: 120000,
      upstream_era: 'auto',
    });
    expect(validateProxy({ upstream: 'u', upstream_era: 'modern-only' })).toBe(false);
    // A list of providers: at least one, none twice.
    expect(validateProxy({ upstream: ['a', 'b'] })).toBe(true);
    expect(validateProxy({ upstream: [] })).toBe(false);
    expect(validateProxy({ upstream: ['a', 'a'] })).toBe(false);
    expect(validateProxy({ upstream: 'u', via: 'call', path: '/mcp', timeout_ms: 10 })).toBe(true);
    expect(validateProxy({ upstream: 'u', retries: 3 })).toBe(false);
    expect(validateProxy({})).toBe(false);
  });

  it('takes retry settings with a single url too, with their defaults; refuses unknown conditions and bounds on other kinds', () => {
    const single = check({ kind: 'openai', url: 'http://a', retry: { on: ['connect_failure', 429], budget: {} } });
    expect(single.ok).toBe(true);
    expect(single.config.retry).toEqual({
      attempts: 2,
      on: ['connect_failure', 429],
      max_retry_after_ms: 5000,
      budget: { percent: 20, min_concurrency: 3 },
    });
    expect(check({ kind: 'http', url: 'http://a', retry: { on: ['5xx'] } }).ok).toBe(false);
    expect(check({ kind: 'http', url: 'http://a', retry: { on: [200] } }).ok).toBe(false);
    expect(check({ kind: 'http', url: 'http://a', retry: { per_try_timeout_ms: 0 } }).errors.join('\n')).toMatch(
      /\/retry\/per_try_timeout_ms must be >= 1/,
    );
    expect(check({ kind: 'http', url: 'http://a', max_active: 8, max_pending: 0 }).ok).toBe(true);
    expect(check({ kind: 'jsonrpc', url: 'http://a', retry: { attempts: 2 } }).ok).toBe(false);
    expect(check({ kind: 'stdio', command: 'node', max_active: 2 }).ok).toBe(false);
  });
});
