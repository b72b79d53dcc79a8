/**
 * A route's pipeline: its stages composed as Koa middleware, each wrapped with its declared
 * failure mode. A GatewayError thrown by a stage is a decision (reject, deny...) and passes
 * through; any other exception is an internal failure of that stage: `fail-closed` (default)
 * answers 500, `fail-open` skips the stage and goes on. Both are counted and logged.
 */
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { StageInstance } from '../plugin.ts';
import type { GatewayContext, Next, Stage } from '../state.ts';

export type OnError = 'fail-closed' | 'fail-open';

export interface BuiltStage {
  id: string;
  plugin: string;
  onError: OnError;
  instance: StageInstance;
  /** The validated options the stage was created with. */
  options: Record<string, unknown>;
}

export function composePipeline(stages: BuiltStage[], metrics: MetricsKit, logger: Logger): Stage {
  const failures = metrics.counter({
    name: 'switchyard_stage_failures_total',
    help: 'Internal failures of pipeline stages, by stage and declared failure mode',
    labelNames: ['stage', 'plugin', 'on_error'] as const,
  });
  const wrapped = stages.map((stage) => guard(stage, failures, logger));
  return (ctx, next) => dispatch(wrapped, 0, ctx, next);
}

function dispatch(stages: Stage[], i: number, ctx: GatewayContext, last: Next): Promise<void> {
  const stage = stages[i];
  if (!stage) return last();
  return stage(ctx, () => dispatch(stages, i + 1, ctx, last));
}

function guard(stage: BuiltStage, failures: ReturnType<MetricsKit['counter']>, logger: Logger): Stage {
  const handle = stage.instance.handle;
  return async (ctx, next) => {
    // Where the rest of the pipeline is: tells this stage's failures from later stages' errors.
    const track: { next: 'not-called' | 'running' | 'done' | 'threw' } = { next: 'not-called' };
    const trackedNext = async () => {
      track.next = 'running';
      try {
        await next();
        track.next = 'done';
      } catch (err) {
        track.next = 'threw';
        throw err;
      }
    };
    try {
      await handle(ctx, trackedNext);
    } catch (err) {
      // Errors from later stages, and typed decisions, are not this stage's failure.
      if (track.next === 'threw' || err instanceof GatewayError) throw err;
      failures.inc({ stage: stage.id, plugin: stage.plugin, on_error: stage.onError });
      logger.error(
        { err, stage: stage.id, on_error: stage.onError, request_id: ctx.state.requestId },
        `stage failed internally (${stage.onError})`,
      );
      if (stage.onError === 'fail-open' && track.next === 'not-called') {
        const skipped = (ctx.state.annotations.failed_open as string[] | undefined) ?? [];
        ctx.state.annotations.failed_open = [...skipped, stage.id];
        return next();
      }
      if (stage.onError === 'fail-open') return; // failed after the rest ran: keep its answer
      throw new GatewayError('internal_error', 'Internal error', { details: { stage: stage.plugin }, cause: err });
    }
  };
}
