/**
 * `policy-api`: operator endpoints over a policy-set. `list` (GET) shows the loaded policies.
 * `test` (POST {text, policy, phase, tenant, model, stream, chunk_chars, prompt}) answers what a request would
 * get, without calling any upstream.
 *
 * With `route` (the route real requests take, e.g. `POST /v1/chat/completions`), the test is a dry
 * run of that route (runtime/dry-run.ts): the same stages with the same options — the tenant's
 * classifiers, policy and mode, the same rule evaluation, the same answer-phase checks, streamed
 * too — so its decision and its audit records are those of a real request. The text is the user's
 * message (phase `ingress`) or the model's answer (phase `egress`, after a request of `prompt`).
 * Without a tenant the caller is anonymous: the answer says which defaults applied.
 *
 * Without `route`, the text is classified with every classifier of the set and the named policy
 * evaluated with no tenant, model or caller (the answer says so in `defaults`).
 */
import {
  type DryRunResult,
  definePlugin,
  type FromSchema,
  GatewayError,
  type JsonSchema,
  openaiWire,
  type PolicyDecision,
  readJsonObject,
  respond,
} from '../../runtime/index.ts';
import type { ClassifierSet } from '../classify/api.ts';
import { type EvaluationData, scoresOf } from './data.ts';
import type { PolicyStore } from './store.ts';

/** The model a test request names when the test names none. */
const defaultModel = 'test-policy';
/** The user's message of an egress test when it gives no `prompt`. */
const defaultPrompt = 'Answer the question.';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['set', 'op'],
  properties: {
    set: { type: 'string', minLength: 1, 'x-ref': 'resource', description: 'policy-set resource.' },
    classifiers: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description: 'classifier-set resource run on the text before the rules (op: test, without `route`).',
    },
    op: { enum: ['test', 'list'] },
    route: {
      type: 'string',
      pattern: '^(GET|POST|PUT|PATCH|DELETE) /',
      description:
        'op: test: the route a real request takes, as `METHOD /path` (e.g. `POST /v1/chat/completions`): the ' +
        "test is a dry run of it (its tenant, classifiers, policy, mode and answer checks: the route's own code " +
        'path), answering its decision, rules, scores, spans and audit records.',
    },
  },
} as const satisfies JsonSchema;
type PolicyApiOptions = FromSchema<typeof optionsSchema>;

export const policyApiPlugin = definePlugin<PolicyApiOptions>({
  name: 'policy-api',
  description: 'Operator endpoints of a policy-set: test a text against a policy (op: test), list policies (op: list).',
  options: optionsSchema,
  create(options, env) {
    const store = env.resource<PolicyStore>(options.set);
    const classifiers = options.classifiers ? env.resource<ClassifierSet>(options.classifiers) : undefined;
    if (options.op === 'list') {
      return async (ctx) => {
        respond(ctx, { policies: store.describe() });
      };
    }
    const route = options.route ? parseRoute(options.route) : undefined;
    return async (ctx) => {
      const body = await readJsonObject(ctx);
      const test = readTest(body, route !== undefined);
      const started = performance.now();
      if (test.policy !== undefined) requireKnownPolicy(store, test.policy);
      if (!route) {
        respond(ctx, { ...(await evaluateAlone(store, classifiers, test, ctx.path)), latency_ms: since(started) });
        return;
      }
      const dryRun = env.service.dryRun;
      if (!dryRun) throw new GatewayError('unavailable', 'The service is not running yet');
      const result = await dryRun(dryRunRequest(route, test));
      respond(ctx, { ...report(result, test), latency_ms: since(started) });
    };
  },
});

interface PolicyTest {
  text: string;
  policy?: string;
  phase: 'ingress' | 'egress';
  tenant?: string;
  model?: string;
  stream: boolean;
  /** A streamed answer's characters per event. */
  chunkChars: number;
  prompt?: string;
}

function readTest(body: Record<string, unknown>, dryRun: boolean): PolicyTest {
  const { text, policy, tenant, model, prompt } = body;
  // not the schema default: a field of the request body, not an option
  const phase = body.phase ?? 'ingress';
  const stream = body.stream ?? false;
  const chunkChars = body.chunk_chars ?? 16;
  if (typeof text !== 'string') throw fieldError('text', 'a string');
  if (policy !== undefined && (typeof policy !== 'string' || policy === '')) {
    throw fieldError('policy', 'a policy or policy file name');
  }
  // A misspelt phase would match no rule and answer "allow": only the phases rules can have.
  if (phase !== 'ingress' && phase !== 'egress') throw fieldError('phase', '"ingress" or "egress"');
  if (tenant !== undefined && (typeof tenant !== 'string' || tenant === '')) throw fieldError('tenant', 'a tenant id');
  if (model !== undefined && (typeof model !== 'string' || model === '')) throw fieldError('model', 'a model name');
  if (typeof stream !== 'boolean') throw fieldError('stream', 'true or false');
  if (typeof chunkChars !== 'number' || !Number.isInteger(chunkChars) || chunkChars < 1 || chunkChars > 65536) {
    throw fieldError('chunk_chars', 'an integer from 1 to 65536');
  }
  if (prompt !== undefined && typeof prompt !== 'string') throw fieldError('prompt', 'a string');
  if (!dryRun && (tenant !== undefined || model !== undefined || stream || prompt !== undefined)) {
    const field = tenant !== undefined ? 'tenant' : model !== undefined ? 'model' : stream ? 'stream' : 'prompt';
    throw new GatewayError(
      'bad_request',
      `Field "${field}" needs a test-policy endpoint configured with the route to test (policy-api \`route\`)`,
      { details: { field } },
    );
  }
  // Without a tenant, the policy is what the test is about: it must be named.
  if (tenant === undefined && policy === undefined) throw fieldError('policy', 'a policy or policy file name');
  return {
    text,
    phase,
    stream,
    chunkChars,
    ...(policy !== undefined ? { policy } : {}),
    ...(tenant !== undefined ? { tenant } : {}),
    ...(model !== undefined ? { model } : {}),
    ...(prompt !== undefined ? { prompt } : {}),
  } as PolicyTest;
}

function requireKnownPolicy(store: PolicyStore, policy: string): void {
  const current = store.current;
  if (current.select(policy).length > 0) return;
  throw new GatewayError('not_found', `Unknown policy "${policy}"`, {
    details: { available: [...current.names, ...new Set(current.policies.map((p) => p.file).filter(Boolean))] },
  });
}

/** The request a real client would send for this test, as a dry run of the route. */
function dryRunRequest(route: { method: string; path: string }, test: PolicyTest) {
  const model = test.model ?? defaultModel;
  const user = test.phase === 'ingress' ? test.text : (test.prompt ?? defaultPrompt);
  // At ingress the answer is empty: the answer checks have nothing to decide on.
  const text = test.phase === 'egress' ? test.text : '';
  const answer = test.stream
    ? {
        status: 200,
        headers: { 'content-type': 'text/event-stream' },
        body: openaiWire.completionStreamOf(text, model, test.chunkChars),
      }
    : {
        status: 200,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(openaiWire.completionOf(text, model)),
      };
  return {
    method: route.method,
    path: route.path,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      messages: [{ role: 'user', content: user }],
      ...(test.stream ? { stream: true } : {}),
    }),
    identity: test.tenant,
    // The policy named with a tenant replaces the tenant's (a what-if); without one it is the policy.
    attributes: test.policy !== undefined ? { policy: test.policy } : undefined,
    answer,
  };
}

interface ClassifiedText {
  score: number;
  label: string;
  confidence: number;
  spans: unknown[];
}

interface Observation {
  stage: string;
  phase: string;
  mode: string;
  policies: string[];
  streamed?: boolean;
  matches: Array<{ policy: string; rule: string; action: string; verb: string; score: number; message: string }>;
  classifiers: Record<string, { score: number; label: string; confidence: number; spans: unknown[] }>;
}

/** The test's answer, from the dry run: the phase's decision, its rules and scores, the audit records. */
function report(result: DryRunResult, test: PolicyTest): Record<string, unknown> {
  const state = result.state;
  const decisions = (state?.decisions ?? []) as PolicyDecision[];
  const observations = result.observations as unknown as Observation[];
  const seen = observations.filter((o) => o.phase === test.phase);
  // not the schema default: a decision's phase, not an option
  const decided = decisions.filter((d) => (d.phase ?? 'ingress') === test.phase);
  const refused = result.status >= 400 && decided.length === 0;
  // The classifiers of the phase: the request's (classify stage) at ingress, the answer's at egress.
  const classified: Record<string, ClassifiedText> =
    test.phase === 'ingress'
      ? ((state?.classifications ?? {}) as Record<
          string,
          { score: number; label: string; confidence: number; spans: unknown[] }
        >)
      : Object.assign({}, ...seen.map((o) => o.classifiers));
  const caller = state?.caller;
  return {
    matches: seen.flatMap((o) =>
      o.matches.map((m) => ({
        rule: m.rule,
        score: m.score,
        action: m.verb,
        message: m.message,
        policy: m.policy,
        phase: o.phase,
      })),
    ),
    // The phase's last decision (a stream's block comes after its allow-so-far), else allow; a
    // request refused before the phase (an ingress block, a bad request) is its refusal.
    final_decision: decided.at(-1)?.action ?? (refused ? 'not_reached' : 'allow'),
    phase: test.phase,
    tenant: test.tenant ?? null,
    model: test.model ?? defaultModel,
    stream: test.stream,
    mode: seen[0]?.mode ?? state?.mode ?? null,
    policies: [...new Set(seen.flatMap((o) => o.policies))],
    classifiers_ran: Object.keys(classified),
    classifiers: Object.fromEntries(
      Object.entries(classified).map(([name, r]) => [
        name,
        { score: r.score, label: r.label, confidence: r.confidence, spans: r.spans },
      ]),
    ),
    ...(test.tenant === undefined
      ? {
          defaults: {
            caller: 'anonymous (no tenant): no tenant attributes, so each stage used its configured default',
            classifiers: "the route's classify stage's own list (`use`), else every classifier of its set",
            policy: test.policy,
            model: test.model === undefined ? defaultModel : undefined,
          },
        }
      : test.model === undefined
        ? { defaults: { model: defaultModel } }
        : {}),
    decisions,
    audit: result.records,
    response: {
      status: result.status,
      headers: Object.fromEntries(
        Object.entries(result.headers).filter(([name]) => name.startsWith('x-') && name !== 'x-request-id'),
      ),
      ...(result.status >= 400 ? { error: parseJson(result.body) } : {}),
    },
    ...(caller ? { caller: { id: caller.id, authenticated: caller.authenticated } } : {}),
  };
}

/** The test without a route: every classifier of the set, the named policy, no tenant or model. */
async function evaluateAlone(
  store: PolicyStore,
  classifiers: ClassifierSet | undefined,
  test: PolicyTest,
  path: string,
): Promise<Record<string, unknown>> {
  const current = store.current;
  const names = current.select(test.policy as string);
  const results = classifiers ? await classifiers.classify(undefined, test.text) : {};
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
    request: { method: 'POST', path },
    body: { messages: [{ role: 'user', content: test.text }] },
    annotations: {},
    classifiers: scoresOf(results),
    tenant: null,
    model: null,
    phase: test.phase,
  };
  const { decision, matches } = current.evaluate(names, data, test.phase);
  return {
    matches: matches.map((m) => ({
      rule: m.rule,
      score: m.score,
      action: m.verb,
      message: m.detail,
      policy: m.policy,
    })),
    final_decision: decision.action,
    phase: test.phase,
    policies: [...names],
    classifiers_ran: Object.keys(results),
    defaults: {
      caller: 'none',
      tenant: null,
      model: null,
      mode: 'strict',
      classifiers: 'every classifier of the set',
    },
  };
}

function parseRoute(route: string): { method: string; path: string } {
  const space = route.indexOf(' ');
  return { method: route.slice(0, space), path: route.slice(space + 1).trim() };
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function since(started: number): number {
  return Math.round((performance.now() - started) * 1000) / 1000;
}

function fieldError(field: string, expected: string): GatewayError {
  return new GatewayError('bad_request', `Field "${field}" must be ${expected}`, { details: { field } });
}
