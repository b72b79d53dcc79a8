/**
 * qom-score: quality-of-message profiling. Scores the SType payload of a JSON-RPC message on the
 * dimensions of a QoM profile (see dimensions.ts), takes their weighted mean, and compares it
 * with the profile's threshold. The result is `ctx.state.qom`; below the threshold an enforcing
 * stage rejects the message (422 `qom_failed`).
 */
import {
  definePlugin,
  effectiveMode,
  enforcementModes,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type JsonSchema,
  jsonrpcWire,
  syncStage,
} from '../../runtime/index.ts';
import type { QomProfile, QomResult, STypeRecord, STypeRegistry } from '../stype-registry/api.ts';
import { registryOption } from '../stype-registry/api.ts';
import { type DimensionName, dimensionNames, type ScoringInput, scorers } from './dimensions.ts';
import { schemaInfo } from './schema-info.ts';

const fallbackProfile = 'default';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['registry'],
  properties: {
    registry: registryOption,
    profile: {
      type: 'string',
      minLength: 1,
      description:
        "Profile for every message. Without it: the SType's first listed profile, else 'default'. A request may override it (metadata.qom_profile).",
    },
    explain: {
      type: 'boolean',
      default: false,
      description: 'Explain each dimension in the result (also on when the request asks for it).',
    },
    enforce: {
      type: 'boolean',
      description: 'Reject messages below the threshold (422 qom_failed). Default: on in strict mode only.',
    },
    mode: { enum: [...enforcementModes], description: "Overrides the route's mode." },
  },
} as const satisfies JsonSchema;
export type QomScoreOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<QomScoreOptions>({
  name: 'qom-score',
  description: 'Score message quality on a QoM profile (six dimensions) and optionally reject below its threshold.',
  // Without a message and its SType nothing is scored (and nothing rejected).
  needs: ['rpc', 'stype'],
  provides: ['qom'],
  options: optionsSchema,
  create(options, env) {
    const registry = env.resource<STypeRegistry>(options.registry);
    checkProfiles(registry, options.profile);
    // Work out what scoring needs from each schema now rather than on the first request.
    for (const record of registry.list()) schemaInfo(record.schema);
    const scores = env.metrics.histogram({
      name: 'switchyard_qom_score',
      help: 'QoM scores of messages, by profile',
      labelNames: ['profile'] as const,
      buckets: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1],
    });

    function pickProfile(ctx: GatewayContext, record: STypeRecord): QomProfile {
      const asked = ctx.state.requested?.qomProfile;
      if (asked !== undefined && asked !== '') {
        const profile = registry.profile(asked);
        if (!profile) {
          throw new GatewayError('bad_request', `Unknown QoM profile "${asked}"`, {
            details: { profile: asked, available_profiles: registry.profiles().map((p) => p.name) },
          });
        }
        return profile;
      }
      const name = options.profile ?? record.qom_profiles[0] ?? fallbackProfile;
      const profile = registry.profile(name) ?? registry.profile(fallbackProfile);
      if (!profile) throw new Error(`qom-score: QoM profile "${name}" is not in the registry`);
      return profile;
    }

    return {
      // Not async: it awaits nothing (docs/performance.md, "Work per request").
      handle: syncStage((ctx, next) => {
        const rpc = ctx.state.rpc;
        const record = rpc && ctx.state.stype ? registry.get(ctx.state.stype.id) : undefined;
        if (!rpc || !record) return next();
        const profile = pickProfile(ctx, record);
        const explain = options.explain || ctx.state.requested?.explain === true;
        const qom = score(profile, scoringInput(ctx, rpc, record, registry), explain);
        ctx.state.qom = qom;
        scores.observe({ profile: profile.name }, qom.score);
        const enforce = options.enforce ?? effectiveMode(options.mode, ctx.state.mode) === 'strict';
        if (!qom.passed && enforce) {
          const details: Record<string, unknown> = {
            stype: record.id,
            profile: qom.profile,
            score: qom.score,
            threshold: qom.threshold,
            dimensions: qom.dimensions,
          };
          if (qom.explanation) details.explanation = qom.explanation;
          // The details say by how much; the message is the dialect's fixed one.
          throw new GatewayError('qom_failed', 'QoM threshold not met', { details });
        }
        return next();
      }),
      describe: () => ({
        profile: options.profile ?? "the SType's first profile, else default",
        enforce: options.enforce ?? 'in strict mode',
        dimensions: [...dimensionNames],
      }),
    };
  },
});

/** The weighted mean of the profile's dimensions (weights default to 1), rounded to 4 places. */
export function score(profile: QomProfile, input: ScoringInput, explain: boolean): QomResult {
  const dimensions: Record<string, number> = {};
  const explanation: Record<string, string> = {};
  let sum = 0;
  let weights = 0;
  for (const name of profile.dimensions) {
    const scorer = scorers[name as DimensionName];
    if (!scorer) continue;
    const { score: s, why } = scorer(input);
    const w = profile.weights?.[name] ?? 1;
    dimensions[name] = round(s);
    if (explain) explanation[name] = why;
    sum += w * s;
    weights += w;
  }
  const total = weights > 0 ? round(sum / weights) : 1;
  const result: QomResult = {
    profile: profile.name,
    score: total,
    threshold: profile.threshold,
    passed: total >= profile.threshold,
    dimensions,
  };
  if (explain) result.explanation = explanation;
  return result;
}

function scoringInput(
  ctx: GatewayContext,
  rpc: JsonRpcRequest,
  record: STypeRecord,
  registry: STypeRegistry,
): ScoringInput {
  const { payload, root } = jsonrpcWire.messagePayload(rpc);
  // Reuse schema-validate's outcome when it ran; validate here otherwise.
  const validation = ctx.state.validation ?? registry.validate(record.id, payload, root);
  return {
    payload,
    schema: record.schema,
    info: schemaInfo(record.schema),
    valid: validation?.valid ?? true,
    violations: validation?.violations ?? [],
    root,
  };
}

function checkProfiles(registry: STypeRegistry, configured: string | undefined): void {
  const names = registry.profiles().map((p) => p.name);
  if (configured !== undefined && !registry.profile(configured)) {
    throw new Error(`qom-score: unknown QoM profile "${configured}" (registry has: ${names.join(', ') || 'none'})`);
  }
  for (const p of registry.profiles()) {
    const unknown = p.dimensions.filter((d) => !(dimensionNames as readonly string[]).includes(d));
    if (unknown.length) {
      throw new Error(
        `qom-score: profile "${p.name}" names unknown dimensions ${unknown.join(', ')} (known: ${dimensionNames.join(', ')})`,
      );
    }
  }
}

function round(x: number): number {
  return Math.round(x * 1e4) / 1e4;
}
