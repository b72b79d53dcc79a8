/**
 * What both phases of a policy stage share (plugins/policy/index.ts wires them): the policy set,
 * the classifiers, which policies apply to a request, and how a decision is recorded, counted,
 * observed by a dry run and answered.
 */
import {
  compileStatePath,
  effectiveMode,
  type GatewayContext,
  GatewayError,
  type Mode,
  type PluginEnv,
  type PolicyDecision,
  recordDecision,
} from '../../runtime/index.ts';
import type { ClassifierResult, ClassifierSet, Span } from '../classify/api.ts';
import { redact } from '../classify/api.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';
import type { PolicySet, RuleMatch } from './engine.ts';
import type { PolicyOptions } from './index.ts';
import { PolicyStore } from './store.ts';

export type PolicyShared = Awaited<ReturnType<typeof policyShared>>;

/** The policy stage's shared state and functions, made once per stage. */
export async function policyShared(options: PolicyOptions, env: PluginEnv) {
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
  const egressOptions = options.egress;
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

  return {
    options,
    env,
    registry,
    store,
    classifierSet,
    log,
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
  };
}

export function spansOf(results: Record<string, ClassifierResult>): Span[] {
  return Object.values(results).flatMap((r) => r.spans);
}

/** The classifiers whose spans the matching redact rules mask. */
export function redactNames(matches: RuleMatch[]): string[] {
  return [...new Set(matches.filter((m) => m.action === 'redact').flatMap((m) => m.redact))];
}

/** The spans, among `results`, that the matching redact rules mask. */
export function redactSpans(matches: RuleMatch[], results: Record<string, ClassifierResult>): Span[] {
  return redactNames(matches).flatMap((name) => results[name]?.spans ?? []);
}

export function addLatency(ctx: GatewayContext, started: number): void {
  const a = ctx.state.annotations;
  a.check_latency_ms = ((a.check_latency_ms as number | undefined) ?? 0) + (performance.now() - started);
}

export type Results = Record<string, ClassifierResult>;
