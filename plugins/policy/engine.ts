/**
 * Evaluating a set of policies. Policies are taken in order, and each policy's rules in order;
 * only rules of the stage's phase take part. Within one policy the first matching `allow` or
 * `deny` rule settles that policy (an `allow` is an exception to the policy's later denies);
 * `flag` rules match without settling anything. Across policies a deny wins: the first policy
 * that settles on deny decides the request, whatever other policies allowed.
 */
import type { PolicyDecision } from '../../runtime/index.ts';
import type { Policy, RuleAction } from './format.ts';

export interface RuleMatch {
  policy: string;
  rule: string;
  action: RuleAction;
  detail: string;
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

  constructor(readonly policies: Policy[]) {
    this.byName = new Map(policies.map((p) => [p.name, p]));
    this.names = policies.map((p) => p.name);
  }

  get ruleCount(): number {
    let n = 0;
    for (const p of this.policies) n += p.rules.length;
    return n;
  }

  evaluate(names: readonly string[], data: unknown, phase: string): Evaluation {
    const matches: RuleMatch[] = [];
    let allowed: RuleMatch | undefined;
    for (const name of names) {
      const policy = this.byName.get(name);
      if (!policy) continue;
      for (const rule of policy.rules) {
        if (rule.phase !== phase || !rule.test(data)) continue;
        const match: RuleMatch = { policy: policy.name, rule: rule.id, action: rule.action, detail: rule.detail };
        matches.push(match);
        if (rule.action === 'deny') return { decision: decisionOf(match), matches };
        if (rule.action === 'allow') {
          allowed ??= match;
          break;
        }
      }
    }
    const flagged = matches.find((m) => m.action === 'flag');
    if (flagged) return { decision: decisionOf(flagged), matches };
    return { decision: allowed ? decisionOf(allowed) : { action: 'allow' }, matches };
  }
}

function decisionOf(m: RuleMatch): PolicyDecision {
  return { action: m.action, policy: m.policy, rule: m.rule, detail: m.detail };
}
