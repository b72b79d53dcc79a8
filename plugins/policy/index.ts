/**
 * policy: a generic policy engine. Policies (json-logic rules, see format.ts) come from the
 * registry's policy documents and/or policy files; they are checked and compiled when the stage
 * is created, and `reload()` re-reads them (a broken set is refused and the old one kept).
 * A deny rejects in strict mode (403 `policy_violation` with {policy, detail}); in permissive
 * mode it is annotated, counted and logged; in audit mode only counted. In strict mode the
 * stage also hides from a `tools/list` answer the tools its policies would refuse to call.
 */
import {
  definePlugin,
  type GatewayContext,
  GatewayError,
  type Next,
  type RpcResponseHook,
} from '../../runtime/index.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';
import { asToolCall, type EvaluationData, evaluationData, isObject } from './data.ts';
import { PolicySet } from './engine.ts';
import { compilePolicy, type Policy, readPolicyFile } from './format.ts';

type Mode = 'strict' | 'permissive' | 'audit';

export interface PolicyOptions {
  registry?: string;
  files?: string[];
  policies?: string[];
  mode?: Mode;
  phase: string;
  filter_list: boolean;
}

export default definePlugin<PolicyOptions>({
  name: 'policy',
  description: 'Evaluate json-logic policy rules over the message, SType, scores and caller; deny, allow or flag.',
  options: {
    type: 'object',
    additionalProperties: false,
    properties: {
      registry: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description: 'stype-registry resource whose policy documents to load.',
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
      mode: { enum: ['strict', 'permissive', 'audit'], description: "Overrides the route's mode." },
      phase: { type: 'string', minLength: 1, default: 'ingress', description: 'Only rules of this phase run here.' },
      filter_list: {
        type: 'boolean',
        default: true,
        description: 'In strict mode, remove from tools/list answers the tools the caller may not call.',
      },
    },
  },
  async create(options, env) {
    const registry = options.registry ? env.resource<STypeRegistry>(options.registry) : undefined;
    const files = (options.files ?? []).map((f) => env.resolvePath(f));
    const log = env.logger;
    const decisions = env.metrics.counter({
      name: 'switchyard_policy_decisions_total',
      help: 'Policy rule matches by policy, rule and action (policy="none" when no rule matched)',
      labelNames: ['policy', 'rule', 'action'] as const,
    });

    async function load(): Promise<PolicySet> {
      const loaded: Policy[] = [];
      for (const doc of registry?.policies() ?? []) {
        loaded.push(compilePolicy(doc, doc.source ?? `registry policy "${doc.name}"`));
      }
      for (const file of files) {
        for (const doc of await readPolicyFile(file)) loaded.push(compilePolicy(doc, file));
      }
      const seen = new Map<string, string>();
      for (const p of loaded) {
        const other = seen.get(p.name);
        if (other) throw new Error(`policy "${p.name}" is defined twice: ${other} and ${p.source}`);
        seen.set(p.name, p.source);
      }
      for (const name of options.policies ?? []) {
        if (!seen.has(name)) throw new Error(`policy "${name}" is not loaded (loaded: ${[...seen.keys()].join(', ')})`);
      }
      for (const record of registry?.list() ?? []) {
        for (const name of record.policies) {
          if (!seen.has(name)) throw new Error(`SType "${record.id}" lists policy "${name}", which is not loaded`);
        }
      }
      return new PolicySet(loaded);
    }

    let set = await load();

    /** Policies that apply to a message of this SType. */
    function applicable(stype: string | null): readonly string[] {
      if (!options.policies) return set.names;
      const listed = stype ? (registry?.get(stype)?.policies ?? []) : [];
      if (listed.length === 0) return options.policies;
      return [...options.policies, ...listed.filter((n) => !options.policies?.includes(n))];
    }

    function listFilter(current: PolicySet, base: EvaluationData): RpcResponseHook {
      return (response, ctx) => {
        const result = response.result;
        if (!isObject(result) || !Array.isArray(result.tools)) return response;
        const hidden: string[] = [];
        const tools = result.tools.filter((tool) => {
          if (!isObject(tool) || typeof tool.name !== 'string') return true;
          const id = registry?.idForTool(tool.name);
          const record = id ? registry?.get(id) : undefined;
          const data = asToolCall(base, tool.name, record?.id ?? null, record?.status ?? null);
          const denied =
            current.evaluate(applicable(record?.id ?? null), data, options.phase).decision.action === 'deny';
          if (denied) hidden.push(tool.name);
          return !denied;
        });
        if (hidden.length === 0) return response;
        ctx.state.annotations.policy_hidden_tools = hidden;
        return { ...response, result: { ...result, tools } };
      };
    }

    async function handle(ctx: GatewayContext, next: Next): Promise<void> {
      const mode =
        options.mode ?? (ctx.state.mode === 'strict' || ctx.state.mode === 'audit' ? ctx.state.mode : 'permissive');
      const current = set;
      const data = evaluationData(ctx, mode);
      const { decision, matches } = current.evaluate(applicable(data.stype), data, options.phase);
      if (matches.length === 0) decisions.inc({ policy: 'none', rule: 'none', action: 'allow' });
      for (const m of matches) decisions.inc({ policy: m.policy, rule: m.rule, action: m.action });
      ctx.state.decision = decision;
      const flags = matches.filter((m) => m.action === 'flag');
      if (flags.length > 0 && mode !== 'audit') {
        ctx.state.annotations.policy_flags = flags.map((m) => ({ policy: m.policy, rule: m.rule, detail: m.detail }));
      }
      if (decision.action === 'deny') {
        const policy = decision.policy as string;
        const detail = decision.detail as string;
        if (mode === 'strict') {
          // The fixed JSON-RPC message: the seed's body is exactly {policy, detail}.
          throw new GatewayError('policy_violation', 'Policy violation', {
            details: { policy, detail },
          });
        }
        if (mode === 'permissive') {
          ctx.state.annotations.policy_violation = { policy, rule: decision.rule, detail };
          log.warn(
            { request_id: ctx.state.requestId, policy, rule: decision.rule, method: data.method, tool: data.tool },
            'policy denied the request; forwarded (permissive)',
          );
        }
      }
      if (options.filter_list && mode === 'strict' && data.method === 'tools/list') {
        ctx.state.rpcResponseHooks ??= [];
        ctx.state.rpcResponseHooks.push(listFilter(current, data));
      }
      return next();
    }

    return {
      handle,
      /** Re-reads the policy files and registry documents; keeps the current set if the new one is broken. */
      async reload() {
        set = await load();
        log.info({ policies: set.names, rules: set.ruleCount }, 'policies reloaded');
      },
      describe: () => ({
        policies: set.policies.map((p) => ({ name: p.name, source: p.source, rules: p.rules.length })),
        phase: options.phase,
        filter_list: options.filter_list,
      }),
    };
  },
});
