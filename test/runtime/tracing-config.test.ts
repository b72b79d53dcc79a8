/** Where spans go and whether tracing is on: the config keys first, then the standard OTEL_* variables. */
import { describe, expect, it } from 'vitest';
import type { ServiceConfig } from '../../runtime/config/types.ts';
import { createTracing, tracesUrl } from '../../runtime/observability/tracing.ts';

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
});
