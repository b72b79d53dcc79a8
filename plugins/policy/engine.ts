/**
 * Evaluating a set of policies. Policies are taken in order, and each policy's rules in order;
 * only rules of the stage's phase take part. Within one policy the first matching `allow` or
 * `deny` rule settles that policy (an `allow` is an exception to the policy's later denies);
 * `flag` and `redact` rules match without settling anything. Across policies a deny wins: the
 * first policy that settles on deny decides the request, whatever other policies allowed.
 * Without a deny, the decision is `redact` if a redact rule matched (all of them apply), else
 * `flag`, else `allow`.
 */
import type { PolicyDecision } from '../../runtime/index.ts';
import type { Policy, PolicyRule, RuleAction } from './format.ts';

export interface RuleMatch {
  policy: string;
  rule: string;
  action: RuleAction;
  /** The action as the policy file writes it (`stop`, `block`...). */
  verb: string;
  detail: string;
  regulation?: string;
  /** OAuth scopes that would lift the block (the rule's `scopes`). */
  scopes?: string[];
  /** Highest score among the classifiers the rule reads (0 when it reads none). */
  score: number;
  /** Classifiers whose spans a redact rule masks. */
  redact: string[];
}

export interface Evaluation {
  decision: PolicyDecision;
  /** Every rule that matched, in evaluation order (evaluation stops at the first deny). */
  matches: RuleMatch[];
}

export class PolicySet {
  readonly byName: Map<string, Policy>;
  /** Names in load order. */
  readonly names: string[];
  /** Answers of select() and hasPhase(), per argument: a set never changes (a reload builds a new one). */
  readonly #selected = new Map<string, string[]>();
  readonly #phases = new WeakMap<readonly string[], Set<string>>();

  constructor(readonly policies: Policy[]) {
    this.byName = new Map(policies.map((p) => [p.name, p]));
    this.names = policies.map((p) => p.name);
  }

  get ruleCount(): number {
    let n = 0;
    for (const p of this.policies) n += p.rules.length;
    return n;
  }

  /** Policies named `selector`, or read from the file of that base name (e.g. `strict.yaml`). */
  select(selector: string): readonly string[] {
    let names = this.#selected.get(selector);
    if (!names) {
      names = this.byName.has(selector)
        ? [selector]
        : this.policies.filter((p) => p.file === selector).map((p) => p.name);
      // Selectors come from config (tenants' policy names): a bounded set.
      if (this.#selected.size < 10_000) this.#selected.set(selector, names);
    }
    return names;
  }

  /** Whether any rule of these policies runs in `phase`. */
  hasPhase(names: readonly string[], phase: string): boolean {
    let phases = this.#phases.get(names);
    if (!phases) {
      phases = new Set(names.flatMap((n) => this.byName.get(n)?.rules.map((r) => r.phase) ?? []));
      this.#phases.set(names, phases);
    }
    return phases.has(phase);
  }

  evaluate(names: readonly string[], data: unknown, phase: string): Evaluation {
    const matches: RuleMatch[] = [];
    let allowed: RuleMatch | undefined;
    for (const name of names) {
      const policy = this.byName.get(name);
      if (!policy) continue;
      for (const rule of policy.rules) {
        if (rule.phase !== phase || !rule.test(data)) continue;
        const match = matchOf(policy, rule, data);
        matches.push(match);
        if (rule.action === 'block') return { decision: decisionOf(match, phase, matches), matches };
        if (rule.action === 'allow') {
          allowed ??= match;
          break;
        }
      }
    }
    const settled = matches.find((m) => m.action === 'redact') ?? matches.find((m) => m.action === 'flag') ?? allowed;
    return { decision: settled ? decisionOf(settled, phase, matches) : { action: 'allow', phase }, matches };
  }
}

/**
 * The block rule that refuses every call of a tool, whatever its arguments (for hiding it from a
 * tool listing), or undefined. `data` describes a call with no arguments. Rules that read the
 * call (`readsCall`) are not decided: a block of that kind depends on the arguments, and an allow
 * of that kind may be an exception to the policy's later blocks, so the policy cannot be settled.
 */
export function blocksEveryCall(
  set: PolicySet,
  names: readonly string[],
  data: unknown,
  phase: string,
): RuleMatch | undefined {
  for (const name of names) {
    const policy = set.byName.get(name);
    if (!policy) continue;
    for (const rule of policy.rules) {
      if (rule.phase !== phase) continue;
      if (rule.readsCall) {
        if (rule.action === 'allow') break;
        continue;
      }
      if (!rule.test(data)) continue;
      if (rule.action === 'block') return matchOf(policy, rule, data);
      if (rule.action === 'allow') break;
    }
  }
  return undefined;
}

function matchOf(policy: Policy, rule: PolicyRule, data: unknown): RuleMatch {
  return {
    policy: policy.name,
    rule: rule.id,
    action: rule.action,
    verb: rule.verb,
    detail: rule.detail,
    regulation: rule.regulation,
    ...(rule.scopes ? { scopes: rule.scopes } : {}),
    score: scoreOf(rule.classifiers, data),
    redact: rule.redact,
  };
}

function scoreOf(classifiers: string[], data: unknown): number {
  const results = (data as { classifiers?: Record<string, { score?: unknown }> } | null)?.classifiers;
  let score = 0;
  for (const name of classifiers) {
    const s = results?.[name]?.score;
    if (typeof s === 'number' && s > score) score = s;
  }
  return score;
}

function decisionOf(m: RuleMatch, phase: string, matches: RuleMatch[]): PolicyDecision {
  return {
    action: m.action,
    policy: m.policy,
    rule: m.rule,
    detail: m.detail,
    phase,
    ...(m.regulation ? { regulation: m.regulation } : {}),
    details: {
      score: m.score,
      rules: matches.map((x) => x.rule),
      ...(m.scopes && m.action === 'block' ? { required_scopes: m.scopes } : {}),
    },
  };
}
