/**
 * What happens when a stage cannot read the answer it must check (an UninspectableAnswer from its
 * answer phase, or from a stream filter it added): the stage's `on_uninspectable` decides.
 *
 * - `refuse` (default): an `unchecked` decision is recorded (the audit stage writes it) and the
 *   answer is refused: a 502 in the route's dialect for a whole answer, the filter's `refuse`
 *   events (else a cut connection) for a stream already under way.
 * - `pass`: the answer goes on unread; a `passed-unchecked` decision is recorded, the response
 *   says so in `X-Answer-Unchecked` (when its headers are not sent yet), a warning is logged.
 *
 * Both are counted in `switchyard_answers_unchecked_total{stage, reason, outcome}`.
 */
import type { Logger } from 'pino';
import type { Counter } from 'prom-client';
import { recordDecision } from '../decisions.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import type { GatewayContext } from '../state.ts';
import type { SseEvent, SseFilter, SseVerdict } from './event-stream.ts';
import { isUninspectable, type UninspectableAnswer } from './uninspectable.ts';

export type OnUninspectable = 'refuse' | 'pass';

/** The response header that marks an answer passed unchecked (`on_uninspectable: pass`). */
export const uncheckedHeader = 'X-Answer-Unchecked';

function uncheckedCounter(metrics: MetricsKit): Counter<'stage' | 'reason' | 'outcome'> {
  return metrics.counter({
    name: 'switchyard_answers_unchecked_total',
    help: 'Answers a stage had to read but could not (undecodable, wrong type, invalid or cut short), by stage, reason and outcome (refused or passed)',
    labelNames: ['stage', 'reason', 'outcome'] as const,
  });
}

/** Errors already decided by a guard: the stages further out pass them on as they are. */
const decidedErrors = new WeakSet<UninspectableAnswer>();

/** One per stage of a pipeline: applies its `on_uninspectable` to answers it could not read. */
export class AnswerGuard {
  readonly #counter: Counter<'stage' | 'reason' | 'outcome'>;

  constructor(
    readonly stageId: string,
    readonly onUninspectable: OnUninspectable,
    metrics: MetricsKit,
    private readonly logger: Logger,
  ) {
    this.#counter = uncheckedCounter(metrics);
  }

  /** Whether a guard already decided this error (a deeper stage's refusal on its way out). */
  decided(err: UninspectableAnswer): boolean {
    return decidedErrors.has(err);
  }

  /** Records what happened to an answer the stage could not read; true when it passes unchecked. */
  unreadable(ctx: GatewayContext, err: UninspectableAnswer): boolean {
    decidedErrors.add(err);
    const passed = this.onUninspectable === 'pass';
    this.#counter.inc({ stage: this.stageId, reason: err.reason, outcome: passed ? 'passed' : 'refused' });
    recordDecision(ctx, {
      action: passed ? 'passed-unchecked' : 'unchecked',
      rule: 'on_uninspectable',
      detail: err.message,
      phase: 'egress',
      details: { reason: err.reason, stage: this.stageId },
    });
    if (passed && !ctx.headerSent) ctx.set(uncheckedHeader, err.reason);
    this.logger.warn(
      { request_id: ctx.state.requestId, stage: this.stageId, reason: err.reason },
      passed ? 'answer passed unchecked (on_uninspectable: pass)' : 'answer refused: it could not be checked',
    );
    return passed;
  }

  /** The filter as the runtime runs it: an UninspectableAnswer it throws is decided here. */
  guard(ctx: GatewayContext, filter: SseFilter): SseFilter {
    return new GuardedFilter(this, ctx, filter);
  }
}

/**
 * A stream filter under its stage's `on_uninspectable`. Once the stage passed the stream
 * unchecked, the rest of it goes through unread (the filter can no longer be trusted to keep up).
 */
class GuardedFilter implements SseFilter {
  #passing = false;

  constructor(
    private readonly guard: AnswerGuard,
    private readonly ctx: GatewayContext,
    private readonly inner: SseFilter,
  ) {}

  onEvent(event: SseEvent): SseVerdict | undefined | Promise<SseVerdict | undefined> {
    if (this.#passing) return undefined;
    try {
      const verdict = this.inner.onEvent(event);
      if (verdict instanceof Promise) return verdict.catch((err) => this.#failed(err));
      return verdict;
    } catch (err) {
      return this.#failed(err);
    }
  }

  onEnd(): SseEvent[] | Promise<SseEvent[]> {
    if (this.#passing || !this.inner.onEnd) return [];
    try {
      const tail = this.inner.onEnd();
      if (tail instanceof Promise) return tail.catch((err) => this.#failed(err)?.events ?? []);
      return tail;
    } catch (err) {
      return this.#failed(err)?.events ?? [];
    }
  }

  /** undefined: the event passes as it came (the stage passes what it cannot read). */
  #failed(err: unknown): SseVerdict | undefined {
    if (!isUninspectable(err)) throw err;
    if (this.guard.unreadable(this.ctx, err)) {
      this.#passing = true;
      return undefined;
    }
    // Refused: the filter ends the stream in its protocol's terms, or the connection is cut.
    if (!this.inner.refuse) throw err;
    return { events: this.inner.refuse(err), end: true };
  }
}
