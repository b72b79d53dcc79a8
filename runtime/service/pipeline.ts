/**
 * A route's pipeline: its stages composed as Koa middleware, each wrapped with its declared
 * failure mode. A GatewayError thrown by a stage is a decision (reject, block...) and passes
 * through; any other exception is an internal failure of that stage: `fail-closed` (default)
 * answers 500, `fail-open` skips the stage and goes on. Both are counted and logged.
 *
 * The answer phase: after the terminal stage, control comes back through the stages in reverse
 * order. Each stage's `next()` resolves with its own answer handle (StageAnswer: the answer store
 * bound to that stage's guard, so a stream filter it adds runs under its `on_uninspectable`), and
 * an UninspectableAnswer escaping a stage is decided by it: refused (502) or passed unchecked
 * (runtime/answer/guard.ts). When a stage returns, what it wrote the Koa way (`ctx.body`) becomes
 * the answer (the adapter, adoptContextAnswer), and filters it added without its handle
 * (`answerOf(ctx)`) are bound to its guard.
 *
 * It is the one composer: the request core, the upgrade path (the stages in front of the
 * upgrading stage) and the test harness (test/helpers/stage-harness.ts) all run stages through it.
 */
import { type Span, SpanKind, SpanStatusCode, type Tracer } from '@opentelemetry/api';
import type { Logger } from 'pino';
import { adoptContextAnswer } from '../answer/answer.ts';
import { AnswerGuard, type OnUninspectable } from '../answer/guard.ts';
import { StageAnswer } from '../answer/stage-answer.ts';
import { isUninspectable } from '../answer/uninspectable.ts';
import { defaultStatus, GatewayError } from '../errors.ts';
import { type MetricsKit, stageFailuresCounter } from '../observability/metrics.ts';
import type { RequestTrace } from '../observability/request-trace.ts';
import { startChildSpan } from '../observability/tracing.ts';
import type { StageInstance } from '../plugin.ts';
import type { GatewayContext, Stage } from '../state.ts';

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

/**
 * Per request, the index of the deepest stage entered: tells a failing stage whether it had called
 * next. No per-stage closures or tracking objects on the hot path. One key for every pipeline (one
 * pipeline runs on a request's context at a time; none runs another inside a stage): with a key per
 * pipeline, the contexts of different routes had different shapes, and every `ctx.x` read after
 * routing saw two or three of them (docs/performance.md, "IC sites").
 */
const reached = Symbol('pipeline stage reached');
type Tracked = GatewayContext & { [reached]?: number };

export function composePipeline(stages: BuiltStage[], metrics: MetricsKit, logger: Logger): Stage {
  const failures = stageFailuresCounter(metrics);
  /** What stage i's `next()` resolves with: its answer handle (none for the pipeline's caller). */
  type Resolved = StageAnswer | undefined;
  const guards = stages.map((s) => new AnswerGuard(s.id, s.onUninspectable, metrics, logger));
  // Errors thrown by the code after the pipeline (the caller's `next`) are not any stage's failure.
  const fromAfter = new WeakSet<object>();
  const count = stages.length;

  /** Stage i's answer phase begins: the answer is in the store, and its handle is made. */
  const answerPhase = (ctx: GatewayContext, i: number): Resolved => {
    adoptContextAnswer(ctx);
    return i < 0 ? undefined : new StageAnswer(ctx, guards[i] as AnswerGuard);
  };

  /** Resolves with the answer handle of stage i - 1 (the stage whose next() this is). */
  const dispatch = (ctx: Tracked, i: number, last: After): Promise<Resolved> => {
    ctx[reached] = i;
    return i === count ? runLast(ctx, last) : runStage(ctx, i, last);
  };

  // No async function of the composer's own on the way of a request (docs/performance.md, "Work
  // per request"): each stage's run is one `then` on what its handle returned, not an async frame
  // (its promise) plus an `await` (another) per stage.
  const runLast = (ctx: Tracked, last: After): Promise<Resolved> => {
    let ran: unknown;
    try {
      ran = last();
    } catch (err) {
      return Promise.reject(afterFailed(err));
    }
    return Promise.resolve(ran).then(
      () => answerPhase(ctx, count - 1),
      (err) => Promise.reject(afterFailed(err)),
    );
  };

  /** Marks an error thrown by the code after the pipeline as not any stage's failure. */
  const afterFailed = (err: unknown): unknown => {
    if (typeof err === 'object' && err !== null && !(err instanceof GatewayError)) fromAfter.add(err);
    return err;
  };

  const runStage = (ctx: Tracked, i: number, last: After): Promise<Resolved> => {
    // Traced requests only: one check when tracing is off.
    const t = ctx.state.trace;
    return t?.tracer && t.span ? runTraced(ctx, i, last, t, t.tracer, t.span) : runPlain(ctx, i, last);
  };

  /** The stage inside its own span: the current span while it (and what it calls) runs. */
  const runTraced = async (
    ctx: Tracked,
    i: number,
    last: After,
    t: RequestTrace,
    tracer: Tracer,
    parent: Span,
  ): Promise<Resolved> => {
    const stage = stages[i];
    const span = startChildSpan(tracer, parent, `stage ${stage.plugin}`, SpanKind.INTERNAL);
    span.setAttributes({
      'switchyard.stage': stage.plugin,
      'switchyard.stage.id': stage.id,
      'switchyard.route': ctx.state.route,
    });
    t.span = span;
    try {
      return await runPlain(ctx, i, last);
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

  const runPlain = (ctx: Tracked, i: number, last: After): Promise<Resolved> => {
    const stage = stages[i];
    let ran: unknown;
    try {
      ran = stage.instance.handle(ctx, () => ((ctx[reached] ?? i) > i ? nextTwice(stage) : dispatch(ctx, i + 1, last)));
    } catch (err) {
      return failed(ctx, i, last, err);
    }
    // A stage that answered without a promise (as `await` would, its answer phase never throws out of here).
    if (typeof (ran as PromiseLike<unknown> | undefined)?.then !== 'function') {
      try {
        return Promise.resolve(ranThrough(ctx, i));
      } catch (err) {
        return Promise.reject(err);
      }
    }
    // Promise.resolve of a native promise is that promise: one `then`, its only promise.
    return Promise.resolve(ran).then(
      () => ranThrough(ctx, i),
      (err) => failed(ctx, i, last, err),
    );
  };

  /**
   * Stage i returned: its answer phase is over. Filters it added through answerOf(ctx) are its
   * own, and the stage before it begins its answer phase.
   */
  const ranThrough = (ctx: Tracked, i: number): Resolved => {
    ctx.state.answer?.bindFilters(guards[i] as AnswerGuard);
    return answerPhase(ctx, i - 1);
  };

  /** Stage i threw or rejected with `err`: a decision passed on, or its failure handled by its on_error. */
  const failed = async (ctx: Tracked, i: number, last: After, err: unknown): Promise<Resolved> => {
    const stage = stages[i];
    const guard = guards[i] as AnswerGuard;
    // Filters it added before failing are still its own.
    ctx.state.answer?.bindFilters(guard);
    // An answer this stage could not read: its on_uninspectable decides.
    if (isUninspectable(err) && !guard.decided(err)) {
      if (guard.unreadable(ctx, err)) return answerPhase(ctx, i - 1);
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
      await dispatch(ctx, i + 1, last);
      return answerPhase(ctx, i - 1);
    }
    // Failed after the rest ran: keep its answer.
    if (stage.onError === 'fail-open') return answerPhase(ctx, i - 1);
    throw new GatewayError('internal_error', 'Internal error', { details: { stage: stage.plugin }, cause: err });
  };

  // Its value (no stage's handle) is not the caller's: typed away, no promise more per request.
  return (ctx, last) => dispatch(ctx, 0, last) as Promise<unknown> as Promise<void>;
}

/** What the pipeline's caller gives as its `next`: run after the last stage (the request core's check). */
export type After = () => Promise<unknown>;

/**
 * A stage that calls `next()` again would run the rest of the pipeline (the upstream call
 * included) a second time: refused, as koa-compose refuses it. The stage's own failure.
 */
function nextTwice(stage: BuiltStage): Promise<void> {
  return Promise.reject(new Error(`stage ${stage.id} called next() more than once`));
}
