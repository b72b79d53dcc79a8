/**
 * A route's pipeline: its stages composed as Koa middleware, each wrapped with its declared
 * failure mode. A GatewayError thrown by a stage is a decision (reject, block...) and passes
 * through; any other exception is an internal failure of that stage: `fail-closed` (default)
 * answers 500, `fail-open` skips the stage and goes on. Both are counted and logged.
 *
 * The answer phase: after the terminal stage, control comes back through the stages in reverse
 * order. The pipeline knows whose answer phase runs (a stream filter added then runs under that
 * stage's `on_uninspectable`), and an UninspectableAnswer escaping a stage is decided by it:
 * refused (502) or passed unchecked (runtime/answer/guard.ts).
 *
 * It is the one composer: the request core, the upgrade path (the stages in front of the
 * upgrading stage) and the test harness (test/helpers/stage-harness.ts) all run stages through it.
 */
import { type Span, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { answeringStage } from '../answer/answer.ts';
import { AnswerGuard, type OnUninspectable } from '../answer/guard.ts';
import { isUninspectable } from '../answer/uninspectable.ts';
import { defaultStatus, GatewayError } from '../errors.ts';
import { type MetricsKit, stageFailuresCounter } from '../observability/metrics.ts';
import type { RequestTrace } from '../observability/request-trace.ts';
import { startChildSpan } from '../observability/tracing.ts';
import type { StageInstance } from '../plugin.ts';
import type { GatewayContext, Next, Stage } from '../state.ts';

export type OnError = 'fail-closed' | 'fail-open';

export interface BuiltStage {
  id: string;
  plugin: string;
  onError: OnError;
  onUninspectable: OnUninspectable;
  instance: StageInstance;
  /** The validated options the stage was created with. */
  options: Record<string, unknown>;
  /** What its plugin declares for dry runs (runtime/dry-run.ts). */
  dryRun?: 'run' | 'skip';
}

export function composePipeline(stages: BuiltStage[], metrics: MetricsKit, logger: Logger): Stage {
  const failures = stageFailuresCounter(metrics);
  // Per request, the index of the deepest stage entered (kept on the context under a key of this
  // pipeline's own): tells a failing stage whether it had called next. No per-stage closures or
  // tracking objects on the hot path.
  const reached = Symbol('pipeline stage reached');
  type Tracked = GatewayContext & { [reached]?: number; [answeringStage]?: AnswerGuard };
  const guards = stages.map((s) => new AnswerGuard(s.id, s.onUninspectable, metrics, logger));
  // Errors thrown by the code after the pipeline (the caller's `next`) are not any stage's failure.
  const fromAfter = new WeakSet<object>();
  const count = stages.length;

  const dispatch = (ctx: Tracked, i: number, last: Next): Promise<void> => {
    ctx[reached] = i;
    return i === count ? runLast(ctx, last) : runStage(ctx, i, last);
  };

  const runLast = async (ctx: Tracked, last: Next): Promise<void> => {
    try {
      await last();
    } catch (err) {
      if (typeof err === 'object' && err !== null && !(err instanceof GatewayError)) fromAfter.add(err);
      throw err;
    } finally {
      ctx[answeringStage] = guards[count - 1];
    }
  };

  const runStage = (ctx: Tracked, i: number, last: Next): Promise<void> => {
    // Traced requests only: one check when tracing is off.
    const t = ctx.state.trace;
    return t?.tracer && t.span ? runTraced(ctx, i, last, t, t.tracer, t.span) : runPlain(ctx, i, last);
  };

  /** The stage inside its own span: the current span while it (and what it calls) runs. */
  const runTraced = async (
    ctx: Tracked,
    i: number,
    last: Next,
    t: RequestTrace,
    tracer: Tracer,
    parent: Span,
  ): Promise<void> => {
    const stage = stages[i];
    const span = startChildSpan(tracer, parent, `stage ${stage.plugin}`, SpanKind.INTERNAL);
    span.setAttributes({
      'switchyard.stage': stage.plugin,
      'switchyard.stage.id': stage.id,
      'switchyard.route': ctx.state.route,
    });
    t.span = span;
    try {
      await runPlain(ctx, i, last);
    } catch (err) {
      span.setAttribute('error.type', err instanceof GatewayError ? err.kind : 'internal_error');
      if (!(err instanceof GatewayError) || (err.status ?? defaultStatus[err.kind]) >= 500)
        span.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      t.span = parent;
      span.end();
    }
  };

  const runPlain = async (ctx: Tracked, i: number, last: Next): Promise<void> => {
    const stage = stages[i];
    try {
      await stage.instance.handle(ctx, () => ((ctx[reached] ?? i) > i ? nextTwice(stage) : dispatch(ctx, i + 1, last)));
      ctx[answeringStage] = guards[i - 1]; // the stage before now runs its answer phase
    } catch (err) {
      ctx[answeringStage] = guards[i - 1];
      // An answer this stage could not read: its on_uninspectable decides.
      if (isUninspectable(err) && !guards[i].decided(err)) {
        if (guards[i].unreadable(ctx, err)) return;
        throw err;
      }
      // Typed decisions, and errors from after the pipeline, are not this stage's failure. A later
      // stage's own failure reaches here already turned into a GatewayError by its guard.
      if (err instanceof GatewayError || (typeof err === 'object' && err !== null && fromAfter.has(err))) throw err;
      failures.inc({ stage: stage.id, plugin: stage.plugin, on_error: stage.onError });
      logger.error(
        { err, stage: stage.id, on_error: stage.onError, request_id: ctx.state.requestId },
        `stage failed internally (${stage.onError})`,
      );
      const calledNext = (ctx[reached] ?? i) > i;
      if (stage.onError === 'fail-open' && !calledNext) {
        const skipped = (ctx.state.annotations.failed_open as string[] | undefined) ?? [];
        ctx.state.annotations.failed_open = [...skipped, stage.id];
        return dispatch(ctx, i + 1, last);
      }
      if (stage.onError === 'fail-open') return; // failed after the rest ran: keep its answer
      throw new GatewayError('internal_error', 'Internal error', { details: { stage: stage.plugin }, cause: err });
    }
  };

  return (ctx, next) => dispatch(ctx, 0, next);
}

/**
 * A stage that calls `next()` again would run the rest of the pipeline (the upstream call
 * included) a second time: refused, as koa-compose refuses it. The stage's own failure.
 */
function nextTwice(stage: BuiltStage): Promise<void> {
  return Promise.reject(new Error(`stage ${stage.id} called next() more than once`));
}
