/**
 * The answer phase of an egress policy stage: the answer's text classified and the egress rules
 * applied, to a whole JSON answer (masked or refused) or to a stream as it passes (stream-check.ts,
 * through the runtime's OpenAI wire view); a JSON-RPC route's response to a request (a tool's
 * result) too.
 */
import {
  type Answer,
  answerOf,
  type GatewayContext,
  GatewayError,
  jsonrpcWire,
  mapRpcResponses,
  type Next,
  openaiWire,
  type PolicyDecision,
  type RpcMessage,
  type RpcResponseMap,
  type StageAnswer,
} from '../../runtime/index.ts';
import type { ClassifierResult, ClassifierSet, ClassifyOptions, Span } from '../classify/api.ts';
import { redact } from '../classify/api.ts';
import { evaluationData, evidenceOf, scoresOf } from './data.ts';
import type { Evaluation, PolicySet, RuleMatch } from './engine.ts';
import { addLatency, type PolicyShared, type Results, redactSpans } from './shared.ts';
import {
  type StreamCheckOptions,
  type StreamScan,
  scanDetails,
  streamReader,
  type WindowVerdict,
} from './stream-check.ts';

/** The answer-phase handler of an egress policy stage, and the hold-back it derives per list of policies. */
export function egressPhase(s: PolicyShared): {
  handle: (ctx: GatewayContext, next: Next) => Promise<void>;
  holdbackFor: (current: PolicySet, names: readonly string[]) => number;
} {
  const {
    store,
    classifierSet,
    egressOptions,
    egressNames,
    applicable,
    count,
    record,
    blockError,
    maskWith,
    mode,
    applicableNow,
    observe,
  } = s;
  type AnswerCheck = Evaluation & { results: Record<string, ClassifierResult> };

  /** Classifies a streamed answer's window and evaluates the egress rules on it (at once when it can: see AnswerStream). */
  function checkAnswer(
    ctx: GatewayContext,
    text: string,
    options: ClassifyOptions | undefined,
  ): AnswerCheck | Promise<AnswerCheck> {
    const set = classifierSet as ClassifierSet;
    // Tier A classifiers answer at once: no promise (a stream is checked at every chunk).
    const now = set.classifySync(egressNames, text, options);
    if (now) return evaluateAnswer(ctx, now);
    return set.classify(egressNames, text, options).then((results) => evaluateAnswer(ctx, results));
  }

  function evaluateAnswer(ctx: GatewayContext, results: Record<string, ClassifierResult>): AnswerCheck {
    const current = store.current;
    const data = evaluationData(ctx, mode(ctx), 'egress', scoresOf(results));
    const evaluation = current.evaluate(applicable(current, data.stype, ctx), data, 'egress');
    // Not `{ ...evaluation, results }`: in Node 20 an object spread's copy ends up in the old
    // generation, and a stream runs this on every scan (docs/architecture.md, "Process tuning").
    return { decision: evaluation.decision, matches: evaluation.matches, results };
  }

  /**
   * The egress check of a whole JSON answer, read through its wire format's reader (`wire`):
   * the body to send (the same object when unchanged).
   */
  function checkJsonAnswer(body: unknown, ctx: GatewayContext, wire: AnswerWire): Promise<unknown> {
    let text: string;
    try {
      text = wire.text(body);
    } catch (err) {
      return Promise.reject(err);
    }
    if (text === '') return Promise.resolve(body);
    const started = performance.now();
    // Through classify(), not classifySync: whole answers read in one turn are classified together.
    // One `then`, no async frame (docs/performance.md, "Work per request").
    return (classifierSet as ClassifierSet)
      .classify(egressNames, text)
      .then((results) => decideJsonAnswer(body, ctx, wire, results, started));
  }

  /** The egress decision on a whole JSON answer's results: the body to send (masked when redacted). */
  function decideJsonAnswer(
    body: unknown,
    ctx: GatewayContext,
    wire: AnswerWire,
    results: Record<string, ClassifierResult>,
    started: number,
  ): unknown {
    const { decision, matches } = evaluateAnswer(ctx, results);
    if (ctx.state.dryRun) observe(ctx, 'egress', applicableNow(ctx), matches, results, mode(ctx));
    count(matches);
    const hidden = decision.action === 'allow' ? undefined : evidenceOf(results);
    record(ctx, hidden ? { ...decision, details: { ...decision.details, hidden } } : decision);
    addLatency(ctx, started);
    if (mode(ctx) !== 'strict') return body;
    if (decision.action === 'block') throw blockError(decision);
    if (decision.action === 'redact' && redactSpans(matches, results).length > 0) {
      return wire.mask(body, (t) => maskWith(matches, t));
    }
    return body;
  }

  /** A JSON-RPC answer (a tool's result, indirect prompt injection): its response, as checked. */
  const checkRpcAnswer: RpcResponseMap = (response, ctx) =>
    checkJsonAnswer(response, ctx, rpcAnswers) as Promise<RpcMessage>;

  /**
   * Where a stream may release up to in a checked window: the least of the classifiers'
   * pendingFrom; a classifier without one (a model, or a check that had to wait) holds its
   * longest span, as the fixed hold-back did.
   */
  function pendingFrom(results: Record<string, ClassifierResult>, length: number): number {
    let least = length;
    for (const name in results) {
      const r = results[name];
      const at =
        r.pendingFrom ?? Math.max(0, length - ((classifierSet as ClassifierSet).get(name)?.maxSpanChars ?? length));
      if (at < least) least = at;
    }
    return least;
  }

  /** Whether every egress classifier answers at once (Tier A): then an open check keeps less context. */
  const egressAnswersAtOnce =
    classifierSet !== undefined &&
    (egressNames ?? classifierSet.list().map((c) => c.name)).every((n) => classifierSet.get(n)?.classifySync);

  const egressTrigger = classifierSet?.trigger(egressNames);

  /** Hold-backs per list of policies (the lists come from the policy set, which a reload replaces). */
  const holdbacks = new WeakMap<readonly string[], number>();
  const egressClassifiers = new Set(egressNames ?? classifierSet?.list().map((c) => c.name) ?? []);
  const within = (names: string[]) => names.filter((n) => egressClassifiers.has(n));

  /**
   * The most a stream holds back (streamCheck releases before it as soon as no match can grow
   * into the text, and the hold-back is only the bound): a redact rule must see a whole span of
   * the classifiers it masks before any of it is sent, and a block rule decides on the
   * completed match too (a JWT-like run, a bearer value, a BEGIN line is judged once it ends,
   * so a clean one does not end the stream): both hold up to their classifiers' longest span
   * (`maxSpanChars`). Past it the held text is judged as cut short (detectChars). Derived from
   * the classifier set, so a detector added or changed moves it.
   */
  function holdbackFor(current: PolicySet, names: readonly string[]): number {
    let holdback = holdbacks.get(names);
    if (holdback !== undefined) return holdback;
    const set = classifierSet as ClassifierSet;
    holdback = 0;
    for (const name of names) {
      for (const rule of current.byName.get(name)?.rules ?? []) {
        if (rule.phase !== 'egress') continue;
        if (rule.action === 'redact') holdback = Math.max(holdback, set.maxSpanChars(within(rule.redact)));
        if (rule.action === 'block') holdback = Math.max(holdback, set.maxSpanChars(within(rule.classifiers)));
      }
    }
    holdbacks.set(names, holdback);
    return holdback;
  }

  /**
   * The egress check of one streamed answer, for streamCheck (stream-check.ts). A class: the
   * proxy makes one per streamed answer, and methods on the prototype cost a request nothing.
   * Its window is checked every few hundred characters, but the metrics count the answer once,
   * as they count a whole answer: each rule that fired (the first time), or none.
   */
  class AnswerStream implements StreamCheckOptions {
    readonly windowChars = egressOptions.window_chars;
    readonly scanEveryChars = egressOptions.scan_every_chars;
    readonly holdbackChars: number;
    readonly releaseEveryChars = egressOptions.release_every_chars;
    /**
     * Tier A detectors need at most ~70 characters before a span (`generic_secret`'s name and
     * operator; docs/classifiers.md, "Context before the span"); a model judges what it gets, so
     * with one on egress every check keeps the whole window.
     */
    readonly openContextChars = egressAnswersAtOnce ? OPEN_CONTEXT_CHARS : undefined;
    /** The egress classifiers' trigger (Tier A patterns): a stream tests each chunk for it, not its window. */
    readonly trigger = egressTrigger;
    /** The rules that fired on this answer, each once (made when one fires). */
    private fired: RuleMatch[] | undefined;
    /** The evaluation of a window where no classifier scored. */
    private clean: AnswerCheck | undefined;
    private recorded = false;

    constructor(
      private readonly ctx: GatewayContext,
      names: readonly string[],
    ) {
      this.holdbackChars = egressOptions.holdback_chars ?? holdbackFor(store.current, names);
    }

    check(windowText: string, open = false, untriggered = false): WindowVerdict | Promise<WindowVerdict> {
      const set = classifierSet as ClassifierSet;
      const options = untriggered ? (open ? OPEN_UNTRIGGERED : UNTRIGGERED) : open ? OPEN : undefined;
      const now = set.classifySync(egressNames, windowText, options);
      if (now !== undefined) {
        // A window where nothing scored (most of a stream, checked at every chunk): the rules see
        // the same data every time, so they are evaluated once per stream.
        if (!allZero(now)) return this.verdictOf(evaluateAnswer(this.ctx, now), windowText.length);
        this.clean ??= evaluateAnswer(this.ctx, now);
        return this.verdictOf(
          { decision: this.clean.decision, matches: this.clean.matches, results: now },
          windowText.length,
        );
      }
      const checked = checkAnswer(this.ctx, windowText, options);
      if (checked instanceof Promise) return checked.then((c) => this.verdictOf(c, windowText.length));
      return this.verdictOf(checked, windowText.length);
    }

    verdictOf({ decision, matches, results }: AnswerCheck, length: number): WindowVerdict {
      if (matches.length > 0) this.remember(matches);
      if (this.ctx.state.dryRun && matches.length > 0) {
        observe(this.ctx, 'egress', applicableNow(this.ctx), matches, results, mode(this.ctx), true);
      }
      const spans = matches.length > 0 ? redactSpans(matches, results) : NO_SPANS;
      const enforce = mode(this.ctx) === 'strict';
      return { decision: enforce ? decision : ALLOW, spans, pendingFrom: pendingFrom(results, length) };
    }

    /** Records a block or redaction (the audit stage, further out, writes it before the client sees more). */
    decided(decision: PolicyDecision, scanned: StreamScan): void {
      record(this.ctx, {
        action: decision.action,
        policy: decision.policy,
        rule: decision.rule,
        detail: decision.detail,
        regulation: decision.regulation,
        phase: decision.phase,
        details: { ...decision.details, ...scanDetails(scanned) },
      });
      this.recorded = true;
      if (decision.action === 'block') this.countAnswer(); // a block ends the answer: `ended` will not come
    }

    /** The whole answer was checked: counted once, and an allow recorded with what was scanned. */
    ended(scanned: StreamScan): void {
      if (!this.recorded) record(this.ctx, { action: 'allow', phase: 'egress', details: scanDetails(scanned) });
      this.countAnswer();
    }

    remember(matches: RuleMatch[]): void {
      this.fired ??= [];
      for (const m of matches) {
        if (!this.fired.some((f) => f.policy === m.policy && f.rule === m.rule)) this.fired.push(m);
      }
    }

    /** Counts the answer in switchyard_policy_decisions_total: each rule that fired on it, once (or none). */
    countAnswer(): void {
      count(this.fired ?? []);
    }

    errorBody(reason: PolicyDecision | GatewayError): unknown {
      const err = reason instanceof GatewayError ? reason : blockError(reason);
      return this.ctx.state.dialect ? this.ctx.state.dialect.render(err).body : { error: err.message };
    }

    mask(text: string, spans: Span[]): string {
      return redact(text, spans);
    }

    /**
     * A window without a trigger, once the rules' evaluation of a clean window is known to allow
     * with no rule matching (the same at every chunk): only the classifiers' release point.
     */
    releasePoint(text: string): number | undefined {
      const clean = this.clean;
      if (clean === undefined || clean.matches.length > 0 || clean.decision.action !== 'allow') return undefined;
      return (classifierSet as ClassifierSet).releasePoint(egressNames, text);
    }

    /** The request's decision once the stream is decided (as X-Filter-Decision says it: flag allows). */
    summary(): Record<string, unknown> {
      const d = this.ctx.state.decision;
      const action = d === undefined || d.action === 'flag' || d.action === 'passed-unchecked' ? 'allow' : d.action;
      return {
        action: action === 'unchecked' ? 'block' : action,
        ...(d?.rule !== undefined && action !== 'allow' ? { rule: d.rule, policy: d.policy } : {}),
      };
    }
  }

  /**
   * The answer phase: every answer with a body is read. A stream is checked as it passes; any
   * other answer must be JSON (else it cannot be checked, and on_uninspectable decides).
   */
  function egress(ctx: GatewayContext, next: Next): Promise<void> {
    // This stage's own answer handle: filters it adds run under its guard and on_uninspectable
    // (the store itself when a test calls the stage with a next of its own). One `then`, not an
    // async frame and its await (docs/performance.md, "Work per request").
    return next().then((handle: StageAnswer | undefined) => checkTheAnswer(ctx, handle ?? answerOf(ctx)));
  }

  /** The answer's check: a promise only when it reads the answer. */
  function checkTheAnswer(ctx: GatewayContext, answer: StageAnswer | Answer): Promise<void> | undefined {
    const current = store.current;
    const names = applicable(current, ctx.state.stype?.id ?? null, ctx);
    if (!current.hasPhase(names, 'egress')) return;
    // A JSON-RPC route: the response to a request (a JSON body, or the response event of a
    // stream). A notification's or a response's answer carries none, and the messages a server
    // sends on its own (a GET stream) are not read (docs/enforcement.md).
    if (ctx.state.rpcKind !== undefined || ctx.state.dialect?.name === 'jsonrpc') {
      return ctx.state.rpcKind === 'request' ? mapRpcResponses(ctx, checkRpcAnswer, answer) : undefined;
    }
    if (!answer.hasBody) return;
    if (answer.isEventStream) {
      answer.filterOpenAIChunks(streamReader(new AnswerStream(ctx, names)));
      return;
    }
    return checkWhole(ctx, answer);
  }

  async function checkWhole(ctx: GatewayContext, answer: StageAnswer | Answer): Promise<void> {
    const body = await answer.json();
    if (body === undefined) return;
    const checked = await checkJsonAnswer(body, ctx, openaiAnswers);
    if (checked !== body) answer.setJson(checked);
  }

  return { handle: egress, holdbackFor };
}

/** How the egress check reads and masks a whole answer of one wire format. */
interface AnswerWire {
  text(body: unknown): string;
  /** The body with every text field masked: a copy, or the same object when nothing changed. */
  mask(body: unknown, mask: (text: string) => Promise<string>): Promise<unknown>;
}

const openaiAnswers: AnswerWire = {
  text: openaiWire.answerText,
  async mask(body, mask) {
    const copy = structuredClone(body);
    return (await openaiWire.maskAnswer(copy, mask)) ? copy : body;
  },
};

const rpcAnswers: AnswerWire = {
  text: jsonrpcWire.responseText,
  mask: (body, mask) => jsonrpcWire.maskResponse(body as Record<string, unknown>, mask),
};

const OPEN = { open: true } as const;
const OPEN_UNTRIGGERED = { open: true, untriggered: true } as const;
const UNTRIGGERED = { untriggered: true } as const;
/** Context kept before the held text of a stream at each chunk's check, for Tier A detectors. */
const OPEN_CONTEXT_CHARS = 128;

/** Whether no classifier found anything (score 0, no span). */
function allZero(results: Results): boolean {
  for (const name in results) if (results[name].score !== 0 || results[name].spans.length > 0) return false;
  return true;
}
const NO_SPANS: Span[] = [];
const ALLOW: PolicyDecision = { action: 'allow' };
