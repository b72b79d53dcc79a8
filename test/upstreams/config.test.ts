import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import proxyPlugin from '../../plugins/proxy/index.ts';
import { referenceKeyword } from '../../runtime/config/references.ts';
import { upstreamConfigSchema } from '../../runtime/upstreams/create.ts';

// Strict mode on purpose: it rejects defaults that ajv would silently ignore (e.g. inside oneOf).
const ajv = new Ajv2020({ allErrors: true, useDefaults: true, strict: true });
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
      health_check: { interval_ms: 2000 },
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

  it('rejects unknown kinds, missing fields and fields of another kind', () => {
    expect(check({ kind: 'ftp', url: 'x' }).ok).toBe(false);
    expect(check({ kind: 'http' }).errors).toContain(" must have required property 'url'");
    expect(check({ kind: 'http', url: 'http://a', protocol: 'mcp' }).ok).toBe(false);
    expect(check({ kind: 'stdio', command: 'node', url: 'http://a' }).ok).toBe(false);
    expect(check({ kind: 'openai', url: 'ftp://a' }).ok).toBe(false);
  });
});

describe('proxy options schema', () => {
  const validateProxy = ajv.compile(proxyPlugin.options);
  it('defaults forward_headers and via, and rejects unknown options', () => {
    const options: Record<string, unknown> = { upstream: 'u' };
    expect(validateProxy(options)).toBe(true);
    expect(options).toEqual({ upstream: 'u', forward_headers: [], via: 'auto' });
    expect(validateProxy({ upstream: 'u', via: 'call', path: '/mcp', timeout_ms: 10 })).toBe(true);
    expect(validateProxy({ upstream: 'u', retries: 3 })).toBe(false);
    expect(validateProxy({})).toBe(false);
  });
});
