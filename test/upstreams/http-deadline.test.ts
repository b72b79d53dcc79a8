/**
 * The response deadline of an HTTP upstream (runtime/upstreams/deadline.ts) on a real pool in
 * front of a fixture upstream: a small answer whose body hangs fails with upstream_timeout on
 * time, and a caller that only drains the body (no error listener) does not bring the process
 * down (undici destroys an aborted body with a listener of its own).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isGatewayError } from '../../runtime/errors.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { HttpUpstream } from '../../runtime/upstreams/types.ts';
import { type FaultyUpstream, startFaultyUpstream } from '../helpers/faulty-upstream.ts';

const timeoutMs = 1200;
let fixture: FaultyUpstream;
let upstream: HttpUpstream;

beforeAll(async () => {
  fixture = await startFaultyUpstream();
  fixture.fault = 'hang-body';
  upstream = createUpstream(
    'hanging',
    { kind: 'http', url: fixture.url, timeout_ms: timeoutMs },
    {
      logger: silentLogger,
      configDir: process.cwd(),
    },
  ) as HttpUpstream;
});
afterAll(async () => {
  await upstream?.close();
  await fixture?.close();
});

const request = () => ({ method: 'POST', path: '/', headers: { 'content-type': 'application/json' }, body: '{}' });

describe('the deadline of a small answer', () => {
  it('covers its body: reading it fails with upstream_timeout, not before timeout_ms', async () => {
    const started = performance.now();
    const res = await upstream.forward(request());
    expect(res.status).toBe(200);
    let error: unknown;
    try {
      for await (const _ of res.body) {
        // the body never completes
      }
    } catch (err) {
      error = err;
    }
    const elapsed = performance.now() - started;
    expect(isGatewayError(error) && error.kind).toBe('upstream_timeout');
    // A timer never fires early, whatever the load; how late it fires depends on the machine, so
    // only the error says that the deadline ended the read (the body hangs forever otherwise).
    expect(elapsed).toBeGreaterThanOrEqual(timeoutMs - 5);
  });

  it('covers its body when a body idle timeout (longer) watches it too', async () => {
    const watched = createUpstream(
      'hanging-watched',
      { kind: 'http', url: fixture.url, timeout_ms: timeoutMs, body_timeout_ms: 60_000 },
      { logger: silentLogger, configDir: process.cwd() },
    ) as HttpUpstream;
    try {
      const res = await watched.forward(request());
      let error: unknown;
      try {
        for await (const _ of res.body) {
          // the body never completes
        }
      } catch (err) {
        error = err;
      }
      expect(isGatewayError(error) && error.kind).toBe('upstream_timeout');
      expect(isGatewayError(error) && error.details?.timeout_ms).toBe(timeoutMs);
    } finally {
      await watched.close();
    }
  });

  it('a caller that only resume()s the body sees it end; the process does not crash on the timeout', async () => {
    const res = await upstream.forward(request());
    const closed = new Promise((resolve) => res.body.once('close', resolve));
    res.body.resume();
    await closed;
    expect(res.body.destroyed).toBe(true);
  });
});
