/**
 * Public contract of the policy plugin for other plugins: the shared policy set (resource type
 * `policy-set`) and what evaluating it returns.
 */
export type { Evaluation, PolicySet, RuleMatch } from './engine.ts';
export type { Policy, PolicyRule, RuleAction } from './format.ts';
export type { PolicyStore } from './store.ts';
