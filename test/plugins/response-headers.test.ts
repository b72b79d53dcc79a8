/**
 * response-headers: headers from request state, written after the rest of the pipeline ran,
 * on success and when a later stage rejected the request; undefined values are left out.
 * Driven through a real Koa app first, then in a real typed-proxy service.
 */

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import headersPlugin from '../../plugins/response-headers/index.ts';
import { jsonRpcDialect } from '../../runtime/dialects.ts';
import { GatewayError, type Stage, type StageInstance } from '../../runtime/index.ts';
import { createTestEnv, type StartedService, startService } from '../../runtime/testing.ts';
import { everythingStdioYaml } from '../helpers/servers.ts';
import { postRpc, shippedRegistryYaml, writeServiceFile } from '../helpers/services.ts';
import { type StageServer, serveStages } from '../helpers/stage-harness.ts';

describe('response-headers on a Koa app', () => {
  let server: StageServer;
  let url: string;

  beforeAll(async () => {
    const stage = (await headersPlugin.create(
      {
        set: {
          'X-SType': 'stype.id',
          'X-Version': 'stype.version',
          'X-Score': 'qom.score',
          'X-Score-2': { path: 'qom.score', decimals: 2 },
          'X-Count': 'annotations.count',
          'X-Mode': 'mode',
          'X-Request': 'requestId',
          'X-Missing': 'qom.nothing.here',
          'X-Literal': { value: 'typed-proxy' },
          'X-Note': 'annotations.note',
        },
      },
      createTestEnv(),
    )) as StageInstance;
    const laterStage: Stage = async (ctx) => {
      ctx.state.stype = { id: 'everything.echo', version: '1.2.0' };
      ctx.state.annotations.count = 3;
      ctx.state.annotations.note = 'caf\u00e9\r\nX-Injected: 1';
      if (ctx.path === '/fail')
        throw new GatewayError('validation_failed', 'bad', { details: { stype: 'everything.echo' } });
      ctx.state.qom = { profile: 'p', score: 0.8571, threshold: 0.5, passed: true, dimensions: {} };
      ctx.body = { ok: true };
    };
    server = await serveStages([stage.handle, laterStage], { dialect: jsonRpcDialect, state: { mode: 'strict' } });
    url = server.url;
  });
  afterAll(() => {
    server?.close();
  });

  it('sets the headers from state after the pipeline ran', async () => {
    const res = await fetch(`${url}/ok`);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-stype')).toBe('everything.echo');
    expect(res.headers.get('x-version')).toBe('1.2.0');
    expect(res.headers.get('x-score')).toBe('0.857');
    expect(res.headers.get('x-score-2')).toBe('0.86');
    expect(res.headers.get('x-count')).toBe('3');
    expect(res.headers.get('x-mode')).toBe('strict');
    expect(res.headers.get('x-request')).toBe('req-1');
    expect(res.headers.get('x-literal')).toBe('typed-proxy');
    expect(res.headers.has('x-missing')).toBe(false);
    // Non-ASCII and line breaks are percent-encoded, never written raw.
    expect(res.headers.get('x-note')).toBe('caf%C3%A9%0D%0AX-Injected: 1');
    expect(res.headers.has('x-injected')).toBe(false);
  });

  it('sets them too when a later stage throws; undefined values are omitted', async () => {
    const res = await fetch(`${url}/fail`);
    expect(res.status).toBe(422);
    expect(res.headers.get('x-stype')).toBe('everything.echo');
    expect(res.headers.get('x-mode')).toBe('strict');
    expect(res.headers.has('x-score')).toBe(false);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32602);
  });
});

describe('response-headers in the typed proxy (strict, shipped registry)', () => {
  let svc: StartedService;

  beforeAll(async () => {
    const yaml = `
service: headers-test
version: 0.0.1
listen: { port: 0 }
mode: strict
request_id_header: X-Proxy-Request-Id
upstreams:
  everything: ${everythingStdioYaml}
resources:
  registry: ${shippedRegistryYaml}
  # The shipped registry's tool-poisoning policy reads tool definitions through classifiers.
  classifiers:
    type: classifier-set
    classifiers: [{ name: prompt_injection, type: pattern, detectors: [prompt_injection, jailbreak] }]
pipeline:
  - response-headers:
      set:
        X-Proxy-SType: stype.id
        X-Proxy-Schema-Version: stype.version
        X-Proxy-QoM-Score: qom.score
        X-Proxy-Mode: mode
routes:
  - match: { method: POST, path: / }
    dialect: jsonrpc
    pipeline:
      - jsonrpc-parse: {}
      - stype-resolve: { registry: registry }
      - schema-validate: { registry: registry }
      - qom-score: { registry: registry, profile: default }
      - policy: { registry: registry, classifiers: classifiers }
      - proxy: { upstream: everything }
`;
    svc = await startService(writeServiceFile(yaml));
  });
  afterAll(async () => {
    await svc?.close();
  });

  const call = (name: string, args: unknown) =>
    postRpc(`${svc.url}/`, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } });

  it('a forwarded call carries all diagnostic headers', async () => {
    const res = await call('echo', { message: 'Ping from the typed proxy' });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-proxy-stype')).toBe('everything.echo');
    expect(res.headers.get('x-proxy-schema-version')).toBe('1.2.0');
    expect(res.headers.get('x-proxy-qom-score')).toMatch(/^(1|0\.\d{3})$/);
    expect(res.headers.get('x-proxy-mode')).toBe('strict');
    expect(res.headers.get('x-proxy-request-id')).toBeTruthy();
  });

  it('a 422 schema rejection and a 403 policy denial carry them too', async () => {
    const invalid = await call('echo', { message: 42 });
    expect(invalid.status).toBe(422);
    expect(invalid.headers.get('x-proxy-stype')).toBe('everything.echo');
    expect(invalid.headers.get('x-proxy-mode')).toBe('strict');
    expect(invalid.headers.has('x-proxy-qom-score')).toBe(false); // rejected before scoring
    const denied = await call('get-env', {});
    expect(denied.status).toBe(403);
    expect(denied.headers.get('x-proxy-stype')).toBe('everything.get-env');
    expect(denied.headers.get('x-proxy-qom-score')).toBeTruthy();
    expect(denied.headers.get('x-proxy-request-id')).toBeTruthy();
  });
});
