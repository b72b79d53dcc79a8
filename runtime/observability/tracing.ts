/**
 * OpenTelemetry tracing of a service: one tracer provider per service (its own `service.name`),
 * a batch processor and the OTLP/HTTP (JSON) exporter. Off unless `tracing.enabled`; when off no
 * provider exists and the request path only checks one field.
 *
 * There is no context manager (no async_hooks cost): the request's current span travels in
 * `ctx.state.trace` (runtime/observability/request-trace.ts) and parents are passed explicitly.
 */
import { ROOT_CONTEXT, type Span, SpanKind, type Tracer, trace } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';
import type { ServiceConfig } from '../config/types.ts';

export interface TracingConfig {
  enabled: boolean;
  /** OTLP/HTTP base URL (`/v1/traces` is appended) or, ending in /v1/traces, the full URL. */
  endpoint?: string;
  sample_ratio?: number;
  service_name?: string;
  /** How long spans wait in the batch before export (OTEL_BSP_SCHEDULE_DELAY). */
  export_delay_ms?: number;
}

export interface Tracing {
  tracer: Tracer;
  /** Exports what is queued, then stops (service stop). */
  shutdown(): Promise<void>;
}

type Env = Record<string, string | undefined>;

/** How long a stop waits for the last spans to be exported. */
export const shutdownWaitMs = 2000;

/** The traces URL: the config's endpoint, else the standard OTEL_* variables, else the local collector. */
export function tracesUrl(config: TracingConfig | undefined, env: Env = process.env): string {
  if (config?.endpoint) return /\/v1\/traces\/?$/.test(config.endpoint) ? config.endpoint : join(config.endpoint);
  return env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || join(env.OTEL_EXPORTER_OTLP_ENDPOINT || 'http://127.0.0.1:4318');
}
const join = (base: string) => `${base.replace(/\/+$/, '')}/v1/traces`;

/** Undefined when tracing is off (the default; OTEL_SDK_DISABLED=true also turns it off). */
export function createTracing(service: ServiceConfig, env: Env = process.env): Tracing | undefined {
  const config = service.tracing;
  if (!config?.enabled || env.OTEL_SDK_DISABLED === 'true') return undefined;
  const envRatio = Number(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = config.sample_ratio ?? (Number.isFinite(envRatio) ? envRatio : 1);
  const envDelay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  const exporter = new OTLPTraceExporter({ url: tracesUrl(config, env) });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      'service.name': config.service_name || env.OTEL_SERVICE_NAME || service.service,
      'service.version': service.version,
    }),
    // A caller's sampled trace stays sampled (parent-based, the OpenTelemetry default); new traces by ratio.
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(Math.min(1, Math.max(0, ratio))) }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        scheduledDelayMillis: config.export_delay_ms ?? (Number.isFinite(envDelay) && envDelay > 0 ? envDelay : 5000),
      }),
    ],
  });
  return {
    tracer: provider.getTracer('switchyard', service.version),
    // A collector that is down makes the exporter retry for seconds: the stop waits at most this.
    shutdown: () =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(resolve, shutdownWaitMs);
        timer.unref();
        provider.shutdown().then(
          () => {
            clearTimeout(timer);
            resolve();
          },
          (err) => {
            clearTimeout(timer);
            reject(err);
          },
        );
      }),
  };
}

const traceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const zeroTraceId = '0'.repeat(32);
const zeroSpanId = '0'.repeat(16);

/** The server span of a request, continuing the caller's W3C `traceparent` when it is valid. */
export function startServerSpan(tracer: Tracer, name: string, incoming: string, attributes: Record<string, string>) {
  const m = incoming ? traceparentPattern.exec(incoming) : null;
  const parent =
    m && m[1] !== zeroTraceId && m[2] !== zeroSpanId
      ? trace.setSpanContext(ROOT_CONTEXT, {
          traceId: m[1],
          spanId: m[2],
          traceFlags: Number.parseInt(m[3], 16) & 1,
          isRemote: true,
        })
      : ROOT_CONTEXT;
  return tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
}

/** A child of `parent` (stage: INTERNAL, upstream call: CLIENT). */
export function startChildSpan(tracer: Tracer, parent: Span, name: string, kind: SpanKind): Span {
  return tracer.startSpan(name, { kind }, trace.setSpan(ROOT_CONTEXT, parent));
}

/** The `traceparent` header naming `span` as the parent (sampled flag from the span). */
export function traceparentOf(span: Span): string {
  const c = span.spanContext();
  return `00-${c.traceId}-${c.spanId}-0${c.traceFlags & 1}`;
}
