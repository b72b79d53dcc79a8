/**
 * The decisions of a request: every stage that decides (a policy, the runtime refusing an answer
 * it could not check) records here, so the list the audit trail writes and the summary the
 * decision headers show follow one rule.
 */
import type { GatewayContext, PolicyDecision } from './state.ts';

/** The summary (`ctx.state.decision`) is the most severe decision taken; the later one on a tie. */
const severity: Record<PolicyDecision['action'], number> = {
  allow: 0,
  flag: 1,
  'passed-unchecked': 2,
  redact: 3,
  unchecked: 4,
  block: 4,
};

/**
 * Records a decision: on the request's list (every non-allow one, and the first allow of each
 * phase, so that an audit of everything sees one allow per phase) and as the summary when it is
 * at least as severe as the summary so far.
 */
export function recordDecision(ctx: GatewayContext, decision: PolicyDecision): void {
  const list = ctx.state.decisions;
  if (list === undefined) ctx.state.decisions = [decision];
  else if (decision.action !== 'allow' || !hasPhase(list, decision.phase)) list.push(decision);
  const summary = ctx.state.decision;
  if (!summary || severity[decision.action] >= severity[summary.action]) ctx.state.decision = decision;
}

function hasPhase(list: PolicyDecision[], phase: string | undefined): boolean {
  for (const d of list) if (d.phase === phase) return true;
  return false;
}
