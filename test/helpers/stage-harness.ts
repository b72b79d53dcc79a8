/**
 * Stages behind a real Koa server, run the way the request core (runtime/server/handler.ts) runs
 * a route: a fresh request state first, then the stages in order, a thrown error rendered by a
 * dialect. For plugin tests that need real HTTP (status, headers, streaming) but no whole service.
 */
import { createServer } from 'node:http';
import Koa from 'koa';
import { commitAnswer, discardAnswer } from '../../runtime/answer/answer.ts';
import { type Dialect, simpleDialect } from '../../runtime/dialects.ts';
import { type GatewayContext, type GatewayState, type Stage, toGatewayError } from '../../runtime/index.ts';
import { closeNow, listenLocal } from './servers.ts';

/** A request state as the request core starts one; `overrides` replace its fields. */
export function requestState(overrides: Partial<GatewayState> = {}): GatewayState {
  return {
    requestId: 'req-1',
    service: 'test',
    route: 'r',
    limits: { bodyBytes: 1e6, jsonDepth: 64, answerBytes: 16 * 1024 * 1024 },
    annotations: {},
    ...overrides,
  };
}

export interface StageServerOptions {
  /** Renders thrown errors; the simple dialect unless given. */
  dialect?: Dialect;
  /** Fields of every request's state (see requestState). */
  state?: Partial<GatewayState>;
}

export interface StageServer {
  /** Base URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  close(): void;
}

/**
 * Serves `stages` on an ephemeral port of 127.0.0.1. Pass a plugin's `StageInstance.handle`, and
 * plain `Stage` functions before or after it to play the stages around it.
 */
export async function serveStages(stages: Stage[], options: StageServerOptions = {}): Promise<StageServer> {
  const dialect = options.dialect ?? simpleDialect;
  const app = new Koa<GatewayState>();
  app.silent = true; // a client leaving mid-stream is expected in some tests
  app.use(async (ctx: GatewayContext) => {
    ctx.state = requestState(options.state);
    const run = (i: number): Promise<void> => (stages[i] ? stages[i](ctx, () => run(i + 1)) : Promise.resolve());
    try {
      await run(0);
      commitAnswer(ctx);
    } catch (err) {
      discardAnswer(ctx);
      const gerr = toGatewayError(err);
      if (ctx.headerSent || !ctx.writable) {
        // Too late for an error body: cut the connection, as the request core does.
        ctx.req.socket.destroy();
        return;
      }
      const rendered = dialect.render(gerr, gerr.rpcId ?? ctx.state.rpc?.id);
      ctx.status = rendered.status;
      ctx.body = rendered.body;
      for (const [k, v] of Object.entries(gerr.headers ?? {})) ctx.set(k, v);
    }
  });
  const server = createServer(app.callback());
  const url = await listenLocal(server);
  return { url, close: () => closeNow(server) };
}
