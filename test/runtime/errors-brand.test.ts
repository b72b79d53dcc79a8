/**
 * A plugin package that bundles its own copy of the runtime throws GatewayErrors of its own class.
 * Two imports of runtime/errors.ts under different URLs are two such copies.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as local from '../../runtime/errors.ts';
import { startService } from '../../runtime/testing.ts';
import { writeServiceFile } from '../helpers/services.ts';

type ErrorsModule = typeof local;

async function otherCopy(): Promise<ErrorsModule> {
  const url = new URL('../../runtime/errors.ts?copy=2', import.meta.url).href;
  return (await import(/* @vite-ignore */ url)) as ErrorsModule;
}

describe('GatewayError across copies of the runtime', () => {
  it('the second import is really another module instance', async () => {
    const copy = await otherCopy();
    expect(copy.GatewayError).not.toBe(local.GatewayError);
  });

  it('an error from another copy is recognised by instanceof, isGatewayError and toGatewayError', async () => {
    const copy = await otherCopy();
    const foreign = new copy.GatewayError('rate_limited', 'slow down', { extra: { retry_after_seconds: 3 } });
    expect(foreign instanceof local.GatewayError).toBe(true);
    expect(local.isGatewayError(foreign)).toBe(true);
    const converted = local.toGatewayError(foreign);
    expect(converted).toBe(foreign);
    expect(converted.kind).toBe('rate_limited');
    expect(converted.extra).toEqual({ retry_after_seconds: 3 });
    // And the other way round.
    expect(new local.GatewayError('forbidden', 'no') instanceof copy.GatewayError).toBe(true);
  });

  it('plain errors and look-alikes are still not GatewayErrors', () => {
    const lookalike = Object.assign(new Error('x'), { kind: 'forbidden', name: 'GatewayError' });
    expect(lookalike instanceof local.GatewayError).toBe(false);
    expect(local.isGatewayError(lookalike)).toBe(false);
    expect(local.isGatewayError(null)).toBe(false);
    expect(local.isGatewayError('forbidden')).toBe(false);
    expect(local.toGatewayError(lookalike).kind).toBe('internal_error');
    expect(new local.GatewayError('forbidden', 'no') instanceof Error).toBe(true);
  });

  it('a subclass keeps the ordinary instanceof check', () => {
    class Special extends local.GatewayError {}
    const special = new Special('conflict', 'taken');
    expect(special instanceof Special).toBe(true);
    expect(special instanceof local.GatewayError).toBe(true);
    expect(new local.GatewayError('conflict', 'taken') instanceof Special).toBe(false);
  });

  it('the brand lives on the prototype, not on each error', () => {
    const err = new local.GatewayError('not_found', 'gone', { details: { id: 1 } });
    expect(Object.getOwnPropertySymbols(err)).toEqual([]);
    expect(Object.getOwnPropertySymbols(local.GatewayError.prototype)).toEqual([Symbol.for('switchyard.GatewayError')]);
  });
});

describe('a plugin that bundles its own runtime', () => {
  it('its GatewayErrors are answered in the dialect, not as 500, even with on_error: fail-open', async () => {
    const probes = join(import.meta.dirname, 'fixtures/runtime-probes.ts');
    const file = writeServiceFile(`service: bundled-errors
listen: { port: 0 }
plugins: [${JSON.stringify(probes)}]
routes:
  - match: { method: GET, path: /closed }
    pipeline: [{ foreign-error: {} }]
  - match: { method: GET, path: /open }
    pipeline: [{ foreign-error: {}, on_error: fail-open }, { whoami: {} }]
`);
    const svc = await startService(file);
    try {
      for (const path of ['/closed', '/open']) {
        const res = await fetch(`${svc.url}${path}`);
        expect(res.status, path).toBe(403);
        expect(await res.json()).toMatchObject({
          error: 'policy_violation',
          message: 'denied by a bundled runtime',
          details: { policy: 'copy' },
        });
      }
    } finally {
      await svc.close();
    }
  });
});
