/**
 * policy: a generic policy engine. Policies (json-logic rules, see format.ts) come from a shared
 * `policy-set` resource, or from the registry's policy documents and policy files named on the
 * stage; they are checked and compiled at load, and a reload re-reads them (a broken set is
 * refused and the old one kept).
 *
 * Ingress (the request): a block rejects in strict mode (403 `policy_violation` with {policy,
 * detail}, or the configured `block_error`); in permissive mode it is annotated, counted and
 * logged; in audit mode only counted. A redact rule masks the spans its classifiers found in the
 * request's text before it goes on. In strict mode the stage also hides from a `tools/list`
 * answer the tools its policies refuse whatever the arguments.
 * Egress (the upstream's answer), in the answer phase: the answer's text is classified and the
 * egress rules applied to a whole JSON answer, or to a stream as it passes (stream-check.ts); an
 * answer that cannot be read is refused unless the stage says `on_uninspectable: pass`.
 * Every decision is recorded on `ctx.state.decisions` for the audit trail.
 */
import {
  answerOf,
  compileStatePath,
  definePlugin,
  effectiveMode,
  enforcementModes,
  type GatewayContext,
  GatewayError,
  jsonrpcWire,
  type Mode,
  mapRpcResponses,
  type Next,
  openaiWire,
  type PolicyDecision,
  type RpcResponseMap,
  recordDecision,
  stateFieldOf,
  UninspectableAnswer,
} from '../../runtime/index.ts';
import type { ClassifierResult, ClassifierSet, ClassifyOptions, Span } from '../classify/api.ts';
import { redact } from '../classify/api.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';
import { policyApiPlugin } from './api-stage.ts';
import { asToolCall, evaluationData, evidenceOf, isObject, scoresOf } from './data.ts';
import { blocksEveryCall, type Evaluation, type PolicySet, type RuleMatch } from './engine.ts';
import { policySetResource } from './resource.ts';
import { PolicyStore } from './store.ts';
import {
  type StreamCheckOptions,
  type StreamScan,
  scanDetails,
  streamReader,
  type WindowVerdict,
} from './stream-check.ts';

export interface PolicyOptions {
  set?: string;
  registry?: string;
  files?: string[];
  dir?: string;
  policies?: string[];
  select_from?: string;
  mode?: Mode;
  phase: 'ingress' | 'egress';
  filter_list: boolean;
  block_error?: { code: string };
  classifiers?: string;
  egress?: {
    classifiers?: string[];
    window_chars?: number;
    scan_every_chars?: number;
    holdback_chars?: number;
    release_every_chars?: number;
  };
}

export const policyPlugin = definePlugin<PolicyOptions>({
  name: 'policy',
  dryRun: 'run',
  description: 'Evaluate json-logic policy rules over the message, SType, scores and caller; deny, allow or flag.',
  // What the rules read (classifiers, caller...) is in the policy files, not the options: only
  // the selector path is a need.
  needs: (o) => stateFieldOf(o.select_from),
  provides: (o) => (o.phase === 'egress' ? ['decision', 'decisions'] : ['decision', 'decisions', 'jsonModified']),
  options: {
    type: 'object',
    additionalProperties: false,
    properties: {
      set: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description: 'policy-set resource to evaluate (instead of registry/files/dir on the stage).',
      },
      registry: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description: 'stype-registry resource whose policy documents to load.',
      },
      dir: { type: 'string', minLength: 1, description: 'Directory whose policy files are all loaded.' },
      select_from: {
        type: 'string',
        minLength: 1,
        description:
          'State path naming the policy (or policy file, e.g. `default.yaml`) to apply per request, ' +
          "e.g. `caller.attributes.policy` for a tenant's policy. Unset: `policies`, else every policy.",
      },
      block_error: {
        type: 'object',
        additionalProperties: false,
        required: ['code'],
        properties: { code: { type: 'string', minLength: 1 } },
        description:
          'Answer a block with this error code, the rule in the body and its message (e.g. POLICY_BLOCK), ' +
          "instead of the fixed 'Policy violation' {policy, detail}.",
      },
      classifiers: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description: 'classifier-set resource used to mask spans (redact) and to classify answers (egress).',
      },
      egress: {
        type: 'object',
        additionalProperties: false,
        default: {},
        properties: {
          classifiers: {
            type: 'array',
            items: { type: 'string', minLength: 1 },
            description: 'Classifiers run on answers (default: all of the set).',
          },
          window_chars: { type: 'integer', minimum: 16, default: 512, description: 'Sliding window over a stream.' },
          scan_every_chars: {
            type: 'integer',
            minimum: 1,
            default: 128,
            description: 'Check the window each time this much new streamed text arrived (and at the end).',
          },
          holdback_chars: {
            type: 'integer',
            minimum: 0,
            description:
              'The most streamed text withheld: text is released at every chunk up to where a match could ' +
              'still grow into it, and held text past this bound is judged as cut short. Default: the longest ' +
              "span of the egress rules' classifiers (from the classifier set). Less than that: a redaction of " +
              'text already sent ends the stream as a block. 0: forward at once, checked every scan_every_chars.',
          },
          release_every_chars: {
            type: 'integer',
            minimum: 0,
            default: 0,
            description:
              'Once the first text of a stream went out, check and release again only when this much new ' +
              'text came (fewer checks, text in larger steps). 0: at every chunk.',
          },
        },
      },
      files: {
        type: 'array',
        items: { type: 'string', minLength: 1 },
        description: 'Policy files (YAML or JSON), relative to the config file.',
      },
      policies: {
        type: 'array',
        items: { type: 'string', minLength: 1 },
        description: "Policies to apply, in order, plus those the message's SType lists. Default: every loaded policy.",
      },
      mode: { enum: [...enforcementModes], description: "Overrides the route's mode." },
      phase: {
        enum: ['ingress', 'egress'],
        default: 'ingress',
        description: "Only rules of this phase run here: ingress checks the request, egress the upstream's answer.",
      },
      filter_list: {
        type: 'boolean',
        default: true,
        description: 'In strict mode, remove from tools/list answers the tools the caller may not call.',
      },
    },
  },
  async create(options, env) {
    const registry = options.registry ? env.resource<STypeRegistry>(options.registry) : undefined;
    const store = options.set
      ? env.resource<PolicyStore>(options.set)
      : await PolicyStore.open({
          registry,
          files: (options.files ?? []).map((f) => env.resolvePath(f)),
          dirs: options.dir ? [env.resolvePath(options.dir)] : [],
          required: options.policies,
        });
    const classifierSet = options.classifiers ? env.resource<ClassifierSet>(options.classifiers) : undefined;
    const selectFrom = options.select_from ? compileStatePath(options.select_from) : undefined;
    const log = env.logger;
    const decisions = env.metrics.counter({
      name: 'switchyard_policy_decisions_total',
      help: 'Policy rule matches by policy, rule and action (policy="none" when no rule matched)',
      labelNames: ['policy', 'rule', 'action'] as const,
    });
    const taken = env.metrics.counter({
      name: 'switchyard_decisions_total',
      help: 'Decisions taken by policy stages, by phase and action (allow, flag, redact, block)',
      labelNames: ['phase', 'action'] as const,
    });
    if (options.phase === 'egress' && !classifierSet) {
      throw new Error('an egress policy stage needs `classifiers` (a classifier-set resource) to read answers');
    }
    if (options.phase !== 'egress' && !classifierSet && store.current.hasPhase(store.current.names, 'tools')) {
      throw new Error('policies with `phase: tools` rules need `classifiers` (a classifier-set resource) on the stage');
    }
    const egressOptions = { window_chars: 512, scan_every_chars: 128, ...options.egress };
    const egressNames = egressOptions.classifiers;
    for (const name of egressNames ?? []) {
      if (!classifierSet?.get(name)) throw new Error(`egress classifier "${name}" is not in the classifier set`);
    }

    /** Per SType record, `options.policies` followed by the policies the record lists. */
    const withListed = new WeakMap<object, readonly string[]>();

    /** Policies that apply to a message of this SType. */
    function applicable(current: PolicySet, stype: string | null, ctx?: GatewayContext): readonly string[] {
      if (selectFrom && ctx) {
        const selector = selectFrom(ctx.state);
        if (typeof selector === 'string') return current.select(selector);
      }
      if (!options.policies) return current.names;
      const record = stype ? registry?.get(stype) : undefined;
      const listed = record?.policies ?? [];
      if (!record || listed.length === 0) return options.policies;
      // One list per SType record (frozen, replaced when the registry reloads): the same array on
      // every request, so what is derived from it per list (hasPhase, hold-backs) is computed once.
      let list = withListed.get(record);
      if (!list) {
        list = [...options.policies, ...listed.filter((n) => !options.policies?.includes(n))];
        withListed.set(record, list);
      }
      return list;
    }

    /**
     * Hides from a `tools/list` answer the tools this caller could never call: those a block rule
     * refuses whatever the arguments (a rule that reads the arguments leaves the tool listed, and
     * the call is checked when it comes). Made once; the request comes as `ctx`.
     */
    const filterListing: RpcResponseMap = (response, ctx) => {
      const result = response.result;
      if (!isObject(result) || !Array.isArray(result.tools)) return response;
      const current = store.current;
      const base = evaluationData(ctx, 'strict', options.phase);
      const hidden: string[] = [];
      const tools = result.tools.filter((tool) => {
        if (!isObject(tool) || typeof tool.name !== 'string') return true;
        const id = registry?.idForTool(tool.name);
        const record = id ? registry?.get(id) : undefined;
        const data = asToolCall(base, tool.name, record?.id ?? null, record?.status ?? null);
        const names = applicable(current, record?.id ?? null, ctx);
        const blocked = blocksEveryCall(current, names, data, options.phase) !== undefined;
        if (blocked) hidden.push(tool.name);
        return !blocked;
      });
      if (hidden.length === 0) return response;
      ctx.state.annotations.policy_hidden_tools = hidden;
      return { ...response, result: { ...result, tools } };
    };

    /**
     * Tools withheld from a listing (strict mode), by name, with the decision: a call naming one
     * is refused until a listing shows it clean again. Bounded (a listing is of one upstream).
     */
    const withheld = new Map<string, PolicyDecision>();
    const maxWithheld = 10_000;

    /**
     * The `tools` phase: each tool a `tools/list` answer defines is classified (its name,
     * description and schemas' text, jsonrpcWire.toolDefinitionText) and the `tools` rules
     * evaluated on it. In strict mode a block withholds the tool from the listing; a flag (and a
     * block in permissive mode) marks it in `annotations.tools_flagged`. One decision is recorded
     * for the listing: the most severe, with the tools it concerns.
     */
    const inspectListing: RpcResponseMap = async (response, ctx) => {
      const result = response.result;
      if (!isObject(result) || !Array.isArray(result.tools)) return response;
      if (!classifierSet) throw new Error('`phase: tools` rules need `classifiers` on the policy stage');
      const started = performance.now();
      const m = mode(ctx);
      const current = store.current;
      const names = applicable(current, ctx.state.stype?.id ?? null, ctx);
      const base = evaluationData(ctx, m, 'tools');
      const tools: unknown[] = result.tools;
      // Each definition's text first (a bounded walk, cheap next to classifying it); one too large
      // to classify within the loop budget is not read in part (an instruction after the cut would
      // pass): the listing is refused as uninspectable (502, audited; on_uninspectable: pass opts in).
      const texts = tools.map((tool) =>
        isObject(tool) && typeof tool.name === 'string' ? jsonrpcWire.toolDefinitionText(tool) : undefined,
      );
      const largest = texts.reduce((max, t) => Math.max(max, t?.length ?? 0), 0);
      if (largest > MAX_TOOL_DEFINITION_CHARS) {
        throw new UninspectableAnswer(
          'too_large',
          `a tool definition in the tools/list answer has ${largest} characters of text, over ${MAX_TOOL_DEFINITION_CHARS}`,
        );
      }
      const inspect = async (i: number) => {
        const tool = tools[i] as { name: string };
        const text = texts[i];
        if (text === undefined) return undefined;
        const results = text === '' ? {} : await classifierSet.classify(undefined, text);
        const evaluation = current.evaluate(
          names,
          { ...base, tool: tool.name, classifiers: scoresOf(results) },
          'tools',
        );
        return { ...evaluation, evidence: evidenceOf(results) };
      };
      // In slices of about LISTING_SLICE_CHARS of definition text, the event loop served between
      // them: a listing of megabytes (an upstream's to choose) must not hold every other request.
      const evaluations: Array<Awaited<ReturnType<typeof inspect>>> = [];
      for (let from = 0; from < tools.length; ) {
        let to = from;
        for (let chars = 0; to < tools.length && (to === from || chars < LISTING_SLICE_CHARS); to++) {
          chars += texts[to]?.length ?? 0;
        }
        const slice = Array.from({ length: to - from }, (_, k) => inspect(from + k));
        evaluations.push(...(await Promise.all(slice)));
        from = to;
        if (from < tools.length) await new Promise((r) => setImmediate(r));
      }
      const kept: unknown[] = [];
      const stripped: string[] = [];
      const flagged: Array<{ tool: string; policy?: string; rule?: string; detail?: string }> = [];
      /** What the withheld or flagged tools hid from a human reader, decoded (ClassifierResult.evidence). */
      const hidden: Record<string, string[]> = {};
      let worst: PolicyDecision | undefined;
      for (let i = 0; i < tools.length; i++) {
        const evaluation = evaluations[i];
        const name = (tools[i] as { name?: unknown }).name as string;
        if (!evaluation) {
          kept.push(tools[i]);
          continue;
        }
        if (evaluation.decision.action !== 'allow' && evaluation.evidence) hidden[name] = evaluation.evidence;
        count(evaluation.matches);
        const d = evaluation.decision;
        if (d.action === 'block' && m === 'strict') {
          stripped.push(name);
          if (withheld.size < maxWithheld || withheld.has(name)) withheld.set(name, d);
        } else {
          withheld.delete(name);
          kept.push(tools[i]);
          if (d.action === 'block' || d.action === 'flag') {
            flagged.push({ tool: name, policy: d.policy, rule: d.rule, detail: d.detail });
          }
        }
        if (d.action !== 'allow' && (!worst || (worst.action === 'flag' && d.action === 'block'))) worst = d;
      }
      if (stripped.length > 0) ctx.state.annotations.tools_withheld = stripped;
      if (flagged.length > 0 && m !== 'audit') ctx.state.annotations.tools_flagged = flagged;
      const concerned = [...stripped, ...flagged.map((f) => f.tool)];
      record(
        ctx,
        worst
          ? {
              ...worst,
              details: {
                ...worst.details,
                tools: concerned,
                withheld: stripped.length > 0,
                ...(Object.keys(hidden).length > 0 ? { hidden } : {}),
              },
            }
          : { action: 'allow', phase: 'tools' },
      );
      addLatency(ctx, started);
      return stripped.length > 0 ? { ...response, result: { ...result, tools: kept } } : response;
    };

    function count(matches: RuleMatch[]): void {
      if (matches.length === 0) decisions.inc({ policy: 'none', rule: 'none', action: 'allow' });
      for (const m of matches) decisions.inc({ policy: m.policy, rule: m.rule, action: m.action });
    }

    /** Records a decision (the request's list for the audit trail, its summary) and counts it. */
    function record(ctx: GatewayContext, decision: PolicyDecision): void {
      taken.inc({ phase: decision.phase ?? options.phase, action: decision.action });
      recordDecision(ctx, decision);
    }

    function blockError(decision: PolicyDecision): GatewayError {
      const policy = decision.policy as string;
      const detail = decision.detail as string;
      const scopes = decision.details?.required_scopes;
      if (!options.block_error) {
        // The fixed JSON-RPC message: the seed's body is exactly {policy, detail} (and the scopes
        // that would lift a rule's block, when it names them: an oauth-bearer stage turns them
        // into a 403 insufficient_scope challenge).
        return new GatewayError('policy_violation', 'Policy violation', {
          details: { policy, detail, ...(scopes ? { required_scopes: scopes } : {}) },
        });
      }
      return new GatewayError('policy_violation', detail, {
        code: options.block_error.code,
        details: {
          policy,
          phase: decision.phase,
          ...(decision.regulation ? { regulation: decision.regulation } : {}),
          ...decision.details,
        },
        extra: { rule: decision.rule },
      });
    }

    /** Masks, in `text`, the spans the redact rules' classifiers find. */
    async function maskWith(matches: RuleMatch[], text: string): Promise<string> {
      const names = redactNames(matches);
      if (!classifierSet || names.length === 0 || text === '') return text;
      const results = await classifierSet.classify(names, text);
      return redact(text, spansOf(results));
    }

    function mode(ctx: GatewayContext): Mode {
      return effectiveMode(options.mode, ctx.state.mode);
    }

    /** The policies that apply to this request now. */
    function applicableNow(ctx: GatewayContext): readonly string[] {
      return applicable(store.current, ctx.state.stype?.id ?? null, ctx);
    }

    /**
     * A dry run (runtime/dry-run.ts) is told what this stage saw: the policies it applied, every
     * rule that matched (not only the deciding one), each classifier's score and spans, the mode.
     */
    function observe(
      ctx: GatewayContext,
      phase: string,
      policies: readonly string[],
      matches: RuleMatch[],
      results: Results | undefined,
      m: Mode,
      streamed = false,
    ): void {
      const classifiers: Record<string, unknown> = {};
      for (const [name, r] of Object.entries(results ?? {})) {
        classifiers[name] = { score: r.score, label: r.label, confidence: r.confidence, spans: r.spans };
      }
      ctx.state.dryRun?.observations.push({
        stage: env.stageId,
        phase,
        mode: m,
        policies: [...policies],
        ...(streamed ? { streamed: true } : {}),
        matches: matches.map((x) => ({
          policy: x.policy,
          rule: x.rule,
          action: x.action,
          verb: x.verb,
          score: x.score,
          message: x.detail,
        })),
        classifiers,
      });
    }

    async function ingress(ctx: GatewayContext, next: Next): Promise<void> {
      const started = performance.now();
      const m = mode(ctx);
      const current = store.current;
      const data = evaluationData(ctx, m, options.phase);
      const names = applicable(current, data.stype, ctx);
      // A tool withheld from a listing is not callable by its name either (strict mode).
      const refused = data.method === 'tools/call' && m === 'strict' ? withheld.get(data.tool ?? '') : undefined;
      if (refused) {
        record(ctx, refused);
        addLatency(ctx, started);
        throw blockError(refused);
      }
      const { decision, matches } = current.evaluate(names, data, options.phase);
      if (ctx.state.dryRun) observe(ctx, options.phase, names, matches, ctx.state.classifications as Results, m);
      count(matches);
      record(ctx, decision);
      const flags = matches.filter((x) => x.action === 'flag');
      if (flags.length > 0 && m !== 'audit') {
        ctx.state.annotations.policy_flags = flags.map((x) => ({ policy: x.policy, rule: x.rule, detail: x.detail }));
      }
      if (decision.action === 'block') {
        if (m === 'strict') {
          addLatency(ctx, started);
          throw blockError(decision);
        }
        if (m === 'permissive') {
          ctx.state.annotations.policy_violation = {
            policy: decision.policy,
            rule: decision.rule,
            detail: decision.detail,
          };
          log.warn(
            {
              request_id: ctx.state.requestId,
              policy: decision.policy,
              rule: decision.rule,
              method: data.method,
              tool: data.tool,
            },
            'policy denied the request; forwarded (permissive)',
          );
        }
      }
      if (decision.action === 'redact' && m !== 'audit' && isObject(ctx.state.json)) {
        if (await openaiWire.maskRequest(ctx.state.json, (text) => maskWith(matches, text)))
          ctx.state.jsonModified = true;
      }
      addLatency(ctx, started);
      const listing = data.method === 'tools/list';
      const filter = options.filter_list && m === 'strict' && listing;
      const inspect = listing && current.hasPhase(names, 'tools');
      if (!filter && !inspect) return next();
      await next();
      if (inspect) await mapRpcResponses(ctx, inspectListing);
      if (filter) await mapRpcResponses(ctx, filterListing);
    }

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
    async function checkJsonAnswer(body: unknown, ctx: GatewayContext, wire: AnswerWire): Promise<unknown> {
      const text = wire.text(body);
      if (text === '') return body;
      const started = performance.now();
      // Through classify(), not classifySync: whole answers read in one turn are classified together.
      const results = await (classifierSet as ClassifierSet).classify(egressNames, text);
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
    const checkRpcAnswer: RpcResponseMap = async (response, ctx) =>
      (await checkJsonAnswer(response, ctx, rpcAnswers)) as Record<string, unknown>;

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
      readonly releaseEveryChars = egressOptions.release_every_chars ?? 0;
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
    async function egress(ctx: GatewayContext, next: Next): Promise<void> {
      await next();
      const current = store.current;
      const names = applicable(current, ctx.state.stype?.id ?? null, ctx);
      if (!current.hasPhase(names, 'egress')) return;
      // A JSON-RPC route: the response to a request (a JSON body, or the response event of a
      // stream). A notification's or a response's answer carries none, and the messages a server
      // sends on its own (a GET stream) are not read (docs/enforcement.md).
      if (ctx.state.rpcKind !== undefined || ctx.state.dialect?.name === 'jsonrpc') {
        if (ctx.state.rpcKind === 'request') await mapRpcResponses(ctx, checkRpcAnswer);
        return;
      }
      const answer = answerOf(ctx);
      if (!answer.hasBody) return;
      if (answer.isEventStream) {
        answer.filterOpenAIChunks(streamReader(new AnswerStream(ctx, names)));
        return;
      }
      const body = await answer.json();
      if (body === undefined) return;
      const checked = await checkJsonAnswer(body, ctx, openaiAnswers);
      if (checked !== body) answer.setJson(checked);
    }

    const handle = options.phase === 'egress' ? egress : ingress;

    return {
      handle,
      /** Re-reads the policy files and registry documents; keeps the current set if the new one is broken. */
      async reload() {
        const set = await store.reload();
        log.info({ policies: set.names, rules: set.ruleCount }, 'policies reloaded');
      },
      describe: () => ({
        policies: store.describe(),
        phase: options.phase,
        filter_list: options.filter_list,
        ...(options.phase === 'egress'
          ? {
              holdback_chars:
                egressOptions.holdback_chars ??
                `derived (${holdbackFor(store.current, store.current.names)} for all policies)`,
            }
          : {}),
      }),
    };
  },
});

export default [policyPlugin, policySetResource, policyApiPlugin];

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

function spansOf(results: Record<string, ClassifierResult>): Span[] {
  return Object.values(results).flatMap((r) => r.spans);
}

/** The classifiers whose spans the matching redact rules mask. */
function redactNames(matches: RuleMatch[]): string[] {
  return [...new Set(matches.filter((m) => m.action === 'redact').flatMap((m) => m.redact))];
}

/** The spans, among `results`, that the matching redact rules mask. */
function redactSpans(matches: RuleMatch[], results: Record<string, ClassifierResult>): Span[] {
  return redactNames(matches).flatMap((name) => results[name]?.spans ?? []);
}

function addLatency(ctx: GatewayContext, started: number): void {
  const a = ctx.state.annotations;
  a.check_latency_ms = ((a.check_latency_ms as number | undefined) ?? 0) + (performance.now() - started);
}

/** Definition text classified per turn of the event loop when a tools/list answer is inspected. */
const LISTING_SLICE_CHARS = 64 * 1024;
/**
 * The most text one tool definition may have to be inspected (classifying it is one piece of
 * work, ~10-40 ms per MiB for the Tier A patterns); real definitions are a few KiB.
 */
const MAX_TOOL_DEFINITION_CHARS = 1024 * 1024;

type Results = Record<string, ClassifierResult>;

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
