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
import { definePlugin, enforcementModes, type FromSchema, type JsonSchema, stateFieldOf } from '../../runtime/index.ts';
import { policyApiPlugin } from './api-stage.ts';
import { egressPhase } from './egress.ts';
import { ingressPhase } from './ingress.ts';
import { policySetResource } from './resource.ts';
import { policyShared } from './shared.ts';

const optionsSchema = {
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
} as const satisfies JsonSchema;
export type PolicyOptions = FromSchema<typeof optionsSchema>;

export const policyPlugin = definePlugin<PolicyOptions>({
  name: 'policy',
  dryRun: 'run',
  description: 'Evaluate json-logic policy rules over the message, SType, scores and caller; deny, allow or flag.',
  // What the rules read (classifiers, caller...) is in the policy files, not the options: only
  // the selector path is a need.
  needs: (o) => stateFieldOf(o.select_from),
  provides: ['decision', 'decisions'],
  options: optionsSchema,
  async create(options, env) {
    const s = await policyShared(options, env);
    const { store, log, egressOptions } = s;
    const egress = options.phase === 'egress' ? egressPhase(s) : undefined;
    const handle = egress ? egress.handle : ingressPhase(s);

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
                `derived (${egress?.holdbackFor(store.current, store.current.names)} for all policies)`,
            }
          : {}),
      }),
    };
  },
});

export default [policyPlugin, policySetResource, policyApiPlugin];
