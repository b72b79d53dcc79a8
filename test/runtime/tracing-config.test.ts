/** Where spans go and whether tracing is on: the config keys first, then the standard OTEL_* variables. */
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import type { ServiceConfig } from '../../runtime/config/types.ts';
import { createTracing, shutdownWaitMs, tracesUrl } from '../../runtime/observability/tracing.ts';

describe('tracing configuration', () => {
  it('traces URL: endpoint key, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, else local', () => {
    const env = {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:4318/custom',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://all:4318',
    };
    expect(tracesUrl({ enabled: true, endpoint: 'http://c:4318/' }, env)).toBe('http://c:4318/v1/traces');
    expect(tracesUrl({ enabled: true, endpoint: 'http://c:4318/v1/traces' }, env)).toBe('http://c:4318/v1/traces');
    expect(tracesUrl({ enabled: true }, env)).toBe('http://traces:4318/custom');
    expect(tracesUrl({ enabled: true }, { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://all:4318' })).toBe(
      'http://all:4318/v1/traces',
    );
    expect(tracesUrl(undefined, {})).toBe('http://127.0.0.1:4318/v1/traces');
  });

  it('off by default and with OTEL_SDK_DISABLED=true; on with enabled', async () => {
    const base = { service: 's', version: '1.0.0' } as ServiceConfig;
    expect(createTracing(base, {})).toBeUndefined();
    expect(createTracing({ ...base, tracing: { enabled: true } }, { OTEL_SDK_DISABLED: 'true' })).toBeUndefined();
    const on = createTracing({ ...base, tracing: { enabled: true } }, {});
    expect(on).toBeDefined();
    await on?.shutdown();
  });

  it("a collector that never answers holds a stop for shutdownWaitMs, not for the exporter's retries", async () => {
    // A collector that takes the connection and never answers: the export hangs.
    const held: Socket[] = [];
    const collector = createServer((socket) => held.push(socket)).listen(0, '127.0.0.1');
    await once(collector, 'listening');
    const { port } = collector.address() as { port: number };
    const base = { service: 's', version: '1.0.0' } as ServiceConfig;
    const tracing = createTracing({ ...base, tracing: { enabled: true, endpoint: `http://127.0.0.1:${port}` } }, {});
    tracing?.tracer.startSpan('queued').end();
    // Timers faked: the bound is checked on the clock the code reads, whatever the machine's load.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let stopped = false;
      const stop = tracing?.shutdown().then(() => {
        stopped = true;
      });
      await vi.advanceTimersByTimeAsync(shutdownWaitMs - 1);
      expect(stopped).toBe(false);
      await vi.advanceTimersByTimeAsync(1);
      await stop;
      expect(stopped).toBe(true);
    } finally {
      vi.useRealTimers();
      for (const socket of held) socket.destroy();
      collector.close();
    }
  });
});
