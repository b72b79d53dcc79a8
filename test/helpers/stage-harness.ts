/**
 * Stages behind a real Koa server, run by the runtime's own composer (runtime/service/pipeline.ts)
 * the way the request core (runtime/server/handler.ts) runs a route: the request state every
 * request starts with, the stages composed with their guards (`on_error`, `on_uninspectable`,
 * `next()` refused twice), the answer committed and a streamed body written by the runtime's
 * writer, a thrown error rendered by a dialect. For plugin tests that need real HTTP (status,
 * headers, streaming) but no whole service.
 */
import { createServer } from 'node:http';
import Koa from 'koa';
import { discardAnswer } from '../../runtime/answer/answer.ts';
import type { OnUninspectable } from '../../runtime/answer/guard.ts';
import { type Dialect, simpleDialect } from '../../runtime/dialects.ts';
import { type GatewayContext, type GatewayState, type Stage, toGatewayError } from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createMetricsKit, type MetricsKit } from '../../runtime/observability/metrics.ts';
import { newRequestTrace } from '../../runtime/observability/request-trace.ts';
import { renderError, runPipeline } from '../../runtime/server/handler.ts';
import { childTraceparent } from '../../runtime/server/request-state.ts';
import { respondWithStream } from '../../runtime/server/stream-body.ts';
import { type BuiltStage, composePipeline, type OnError } from '../../runtime/service/pipeline.ts';
import { closeNow, listenLocal } from './servers.ts';

/** A request state as the request core starts one for a routed request; `overrides` replace its fields. */
export function requestState(overrides: Partial<GatewayState> = {}): GatewayState {
  return {
    requestId: 'req-1',
    service: 'test',
    route: 'r',
    limits: { bodyBytes: 1e6, jsonDepth: 64, answerBytes: 16 * 1024 * 1024 },
    traceparent: childTraceparent(''),
    trace: newRequestTrace(),
    dialect: simpleDialect,
    annotations: {},
    ...overrides,
  };
}

export interface StageServerOptions {
  /** Renders thrown errors (and is the state's `dialect`); the simple dialect unless given. */
  dialect?: Dialect;
  /** Fields of every request's state (see requestState). */
  state?: Partial<GatewayState>;
  /** Every stage's `on_uninspectable` (default `refuse`, as in a service file), or each one's in order. */
  onUninspectable?: OnUninspectable | OnUninspectable[];
  /** Every stage's `on_error` (default `fail-closed`). */
  onError?: OnError;
  /** Where the stages' metrics go (the guards count unchecked answers there). */
  metrics?: MetricsKit;
}

export interface StageServer {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  metrics: MetricsKit;
  close(): void;
}

/**
 * Serves `stages` on an ephemeral port of 127.0.0.1. Pass a plugin's `StageInstance.handle`, and
 * plain `Stage` functions before or after it to play the stages around it.
 */
export async function serveStages(stages: Stage[], options: StageServerOptions = {}): Promise<StageServer> {
  const dialect = options.dialect ?? simpleDialect;
  const metrics = options.metrics ?? createMetricsKit();
  const built: BuiltStage[] = stages.map((handle, i) => ({
    id: `r:stage.${i}`,
    plugin: handle.name || `stage.${i}`,
    onError: options.onError ?? 'fail-closed',
    onUninspectable:
      (Array.isArray(options.onUninspectable) ? options.onUninspectable[i] : options.onUninspectable) ?? 'refuse',
    instance: { handle },
    options: {},
  }));
  const pipeline = composePipeline(built, metrics, silentLogger);
  const app = new Koa<GatewayState>();
  app.silent = true; // a client leaving mid-stream is expected in some tests
  app.use(async (ctx: GatewayContext) => {
    ctx.state = requestState({ dialect, ...options.state });
    try {
      await runPipeline(pipeline, ctx);
    } catch (err) {
      discardAnswer(ctx);
      renderError(ctx, toGatewayError(err), dialect);
    }
    respondWithStream(ctx);
  });
  const server = createServer(app.callback());
  const url = await listenLocal(server);
  return { url, metrics, close: () => closeNow(server) };
}
