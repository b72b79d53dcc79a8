/**
 * `policy-api`: operator endpoints over a policy-set. `test` (POST {text, policy, phase}) runs
 * the classifiers on the text and evaluates the named policy (a policy name or a policy file
 * name) in that phase, without calling any upstream: {matches, final_decision, latency_ms}.
 * `list` (GET) shows the loaded policies.
 */
import { definePlugin, GatewayError, readJsonObject } from '../../runtime/index.ts';
import type { ClassifierSet } from '../classify/api.ts';
import { type EvaluationData, scoresOf } from './data.ts';
import type { PolicyStore } from './store.ts';

interface PolicyApiOptions {
  set: string;
  classifiers?: string;
  op: 'test' | 'list';
}

export const policyApiPlugin = definePlugin<PolicyApiOptions>({
  name: 'policy-api',
  description: 'Operator endpoints of a policy-set: test a text against a policy (op: test), list policies (op: list).',
  options: {
    type: 'object',
    additionalProperties: false,
    required: ['set', 'op'],
    properties: {
      set: { type: 'string', minLength: 1, 'x-ref': 'resource', description: 'policy-set resource.' },
      classifiers: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description: 'classifier-set resource run on the text before the rules (op: test).',
      },
      op: { enum: ['test', 'list'] },
    },
  },
  create(options, env) {
    const store = env.resource<PolicyStore>(options.set);
    const classifiers = options.classifiers ? env.resource<ClassifierSet>(options.classifiers) : undefined;
    if (options.op === 'list') {
      return async (ctx) => {
        ctx.body = { policies: store.describe() };
      };
    }
    return async (ctx) => {
      const body = await readJsonObject(ctx);
      const text = body.text;
      const policy = body.policy;
      const phase = body.phase ?? 'ingress';
      if (typeof text !== 'string') throw fieldError('text', 'a string');
      if (typeof policy !== 'string' || policy === '') throw fieldError('policy', 'a policy or policy file name');
      // A misspelt phase would match no rule and answer "allow": only the phases rules can have.
      if (phase !== 'ingress' && phase !== 'egress') throw fieldError('phase', '"ingress" or "egress"');
      const started = performance.now();
      const current = store.current;
      const names = current.select(policy);
      if (names.length === 0) {
        throw new GatewayError('not_found', `Unknown policy "${policy}"`, {
          details: { available: [...current.names, ...new Set(current.policies.map((p) => p.file).filter(Boolean))] },
        });
      }
      const results = classifiers ? await classifiers.classify(undefined, text) : {};
      const data: EvaluationData = {
        method: null,
        tool: null,
        arguments: null,
        params: null,
        stype: null,
        stype_status: null,
        qom: null,
        schema_valid: null,
        caller: { id: null, authenticated: false, attributes: {} },
        mode: 'strict',
        request: { method: 'POST', path: ctx.path },
        body: { messages: [{ role: 'user', content: text }] },
        annotations: {},
        classifiers: scoresOf(results),
        tenant: null,
        model: null,
        phase,
      };
      const { decision, matches } = current.evaluate(names, data, phase);
      ctx.body = {
        matches: matches.map((m) => ({
          rule: m.rule,
          score: m.score,
          action: m.verb,
          message: m.detail,
          policy: m.policy,
        })),
        final_decision: decision.action,
        latency_ms: Math.round((performance.now() - started) * 1000) / 1000,
      };
    };
  },
});

function fieldError(field: string, expected: string): GatewayError {
  return new GatewayError('bad_request', `Field "${field}" must be ${expected}`, { details: { field } });
}
