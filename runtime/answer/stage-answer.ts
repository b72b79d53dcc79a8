/**
 * The answer as one stage sees it in its answer phase: `const answer = await next()`. The
 * composer (runtime/service/pipeline.ts) resolves each stage's `next()` with a handle bound to
 * that stage: its `on_uninspectable` and its guard go with every stream filter it adds, whatever
 * stage runs when the stream is written. The handle reads the request's one answer store
 * (`ctx.state.answer`, runtime/answer/answer.ts) when used, so it always sees the current answer,
 * replaced ones included.
 */
import { GatewayError } from '../errors.ts';
import type { GatewayContext } from '../state.ts';
import type { OpenAIStreamOptions, OpenAIStreamReader } from '../wire/openai-stream.ts';
import type { Answer, HeaderValue } from './answer.ts';
import type { SseFilter } from './event-stream.ts';
import type { AnswerGuard, OnUninspectable } from './guard.ts';
import type { UninspectableAnswer } from './uninspectable.ts';

export class StageAnswer {
  constructor(
    private readonly ctx: GatewayContext,
    private readonly guard: AnswerGuard,
  ) {}

  /** The id of the stage this handle is bound to (as in metrics and logs). */
  get stageId(): string {
    return this.guard.stageId;
  }

  /** What the stage does with an answer it must read and cannot (its config, else its plugin's declaration). */
  get onUninspectable(): OnUninspectable {
    return this.guard.onUninspectable;
  }

  /** The request's answer store. */
  get store(): Answer {
    const answer = this.ctx.state.answer;
    if (!answer) throw new GatewayError('internal_error', 'No answer: the stages after this one produced none');
    return answer;
  }

  get status(): number {
    return this.store.status;
  }

  set status(value: number) {
    this.store.status = value;
  }

  get headers(): Record<string, HeaderValue> {
    return this.store.headers;
  }

  get contentType(): string {
    return this.store.contentType;
  }

  get isEventStream(): boolean {
    return this.store.isEventStream;
  }

  /** False when there is certainly nothing to read (no answer at all included). */
  get hasBody(): boolean {
    return this.ctx.state.answer?.hasBody ?? false;
  }

  /** Whether stages added stream filters to the answer. */
  get filtered(): boolean {
    return this.ctx.state.answer?.filtered ?? false;
  }

  get readJson(): unknown {
    return this.ctx.state.answer?.readJson;
  }

  bytes(): Promise<Buffer> {
    return this.store.bytes();
  }

  json(): Promise<unknown> {
    return this.store.json();
  }

  setJson(value: unknown): void {
    this.store.setJson(value);
  }

  /** Checks an event stream event by event, under this stage's `on_uninspectable`. */
  filterEvents(filter: SseFilter): void {
    this.store.filterEvents(filter, this.guard);
  }

  /** Reads an OpenAI-style stream as parsed chunks, under this stage's `on_uninspectable`. */
  filterOpenAIChunks(reader: OpenAIStreamReader, options?: OpenAIStreamOptions): void {
    this.store.filterOpenAIChunks(reader, options, this.guard);
  }

  trailer(name: string, value: () => string | undefined): void {
    this.store.trailer(name, value);
  }

  onEnd(hook: (complete: boolean) => void): void {
    this.store.onEnd(hook);
  }

  /**
   * Applies this stage's `on_uninspectable` to an answer it could not read, for a stage that
   * catches the error itself: true when the answer passes unchecked (recorded, marked, counted),
   * false when it must be refused (throw `err` then).
   */
  uninspectable(err: UninspectableAnswer): boolean {
    return this.guard.unreadable(this.ctx, err);
  }
}
