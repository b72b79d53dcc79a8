/**
 * schema-validate: checks a JSON-RPC message against its SType's JSON Schema (ajv, draft
 * 2020-12 unless the schema names draft-07, every error collected) and, where the SType defines
 * an output schema, the upstream's result too. It also compares the upstream's tool definitions
 * with the ones pinned in the registry (tool pinning), and checks their schemas against the
 * bounds of SEP-2106 (listed-schemas.ts). What happens on failure depends on the enforcement mode:
 * `strict` rejects, `permissive` forwards and annotates/counts/logs, `audit` forwards and counts.
 *
 * Every schema is inspected before it compiles (schema-inspect.ts: no reference out of the
 * document, bounded nesting, subschemas and size, patterns on a linear engine) and every
 * validation runs under a counted work budget (schema-budget.ts): a hostile schema is refused, or
 * its validation bounded, never left to hold the event loop. Compiling is bounded the same way
 * (`max_compile`, counted at inspection), and the ajvs are warmed before the service serves.
 */
import {
  Answer,
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonRpcRequest,
  type JsonSchema,
  jsonrpcWire,
  mapRpcResponses,
  type PolicyDecision,
  type RpcResponseMap,
  recordDecision,
  syncStage,
  type Violation,
} from '../../runtime/index.ts';
import type { ResolvedSType, STypeRegistry } from '../stype-registry/api.ts';
import { registryOption } from '../stype-registry/api.ts';
import { ListedSchemas, type RefusedTool } from './listed-schemas.ts';
import { effectiveMode, type Mode, modes } from './mode.ts';
import { type Drift, ToolPins } from './pinning.ts';
import { defaultLimits, type SchemaLimits } from './schema-inspect.ts';
import { type Compiled, compileToolSchema, type Validation, warmToolSchemas } from './tool-schema.ts';

type PinCheck = 'off' | 'flag' | 'enforce';

const { messagePayload, toolCallOf } = jsonrpcWire;

/** More violations than this are cut (the count is kept in `violations_total`). */
const maxViolations = 100;

/** JSON-RPC code of a result that fails its output schema: the server, not the client, is at fault. */
export const resultErrorCode = -32603;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['registry'],
  properties: {
    registry: registryOption,
    mode: {
      enum: [...modes],
      description:
        "Overrides the route's mode. strict: reject; permissive: forward, annotate, count, log; audit: count.",
    },
    validate_results: {
      type: 'boolean',
      default: true,
      description: "Validate the upstream's result against the SType's output schema, when it has one.",
    },
    unknown_stype: {
      enum: ['allow', 'reject'],
      default: 'allow',
      description: 'A message with no registered SType: pass it, or treat it as a schema failure.',
    },
    argument_errors: {
      enum: ['jsonrpc', 'tool-result'],
      default: 'jsonrpc',
      description:
        'Strict mode, tools/call arguments that fail their schema: the error of the dialect (HTTP 422, -32602 with violations), or a tool result with isError: true that the model can read and correct (MCP 2025-11-25, SEP-1303).',
    },
    pin_check: {
      enum: ['off', 'flag', 'enforce'],
      description:
        'Tool-definition drift, and listed tool schemas outside the `schemas` bounds: flag, or remove those tools and refuse their calls. Default: enforce in strict mode, else flag.',
    },
    schemas: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description:
        'Bounds on tool schemas (MCP 2026-07-28, SEP-2106), the SType schemas validated with and those a tools/list answer carries: max_depth (32), max_subschemas (2000), max_schema_bytes (262144), max_work (2000000, about 50 ms), max_compile (300, at most about 33 ms). A schema over one, with a $ref out of the document or a pattern without a linear-time match is refused with the reason; a value whose counted validation work exceeds max_work fails.',
      properties: {
        max_depth: {
          type: 'integer',
          minimum: 1,
          maximum: 256,
          default: defaultLimits.max_depth,
          description: 'Nesting of subschemas (allOf in anyOf in properties...).',
        },
        max_subschemas: {
          type: 'integer',
          minimum: 1,
          maximum: 100000,
          default: defaultLimits.max_subschemas,
          description: 'Subschemas in one schema, $defs included.',
        },
        max_schema_bytes: {
          type: 'integer',
          minimum: 1024,
          maximum: 16777216,
          default: defaultLimits.max_schema_bytes,
          description: 'Size of one schema (characters of its JSON).',
        },
        max_work: {
          type: 'integer',
          minimum: 1000,
          maximum: 1000000000,
          default: defaultLimits.max_work,
          description:
            'Counted work of one validation (schema cost per value × values, characters and item pairs): the default is about 50 ms of one core.',
        },
        max_compile: {
          type: 'integer',
          minimum: 100,
          maximum: 1000000,
          default: defaultLimits.max_compile,
          description:
            'Counted work of compiling a schema, which happens on the event loop at its first use (subschemas, keywords, required names, alternatives; a pattern 12, a format 2, a $ref 8 more): the default is at most about 33 ms of one core (measured loaded).',
        },
      },
    },
  },
} as const satisfies JsonSchema;
export type SchemaValidateOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<SchemaValidateOptions>({
  name: 'schema-validate',
  description:
    'Validate JSON-RPC messages (and tool results) against their SType schema; flag or refuse drifted tools.',
  // Without an SType every message counts as untyped and passes (unknown_stype: allow).
  needs: ['rpc', 'stype'],
  provides: ['validation', 'resultValidation'],
  options: optionsSchema,
  create(options, env) {
    const registry = env.resource<STypeRegistry>(options.registry);
    const pins = new ToolPins(registry);
    const limits: SchemaLimits = { ...defaultLimits, ...options.schemas };
    const listed = new ListedSchemas(limits);
    // ajv's first compile in the process (its meta-schemas) before the service serves, not on a
    // request; a hot reload while serving finds the ajvs made (they are the process's) or pays it once.
    if (env.service.mainUrl === undefined) warmToolSchemas();
    /** Compiled SType schemas, by schema object (a registry reload brings new objects; old ones are collected). */
    const compiled = new WeakMap<object, Compiled>();
    const log = env.logger;
    const violationsTotal = env.metrics.counter({
      name: 'switchyard_schema_violations_total',
      help: 'Messages that failed schema validation, by SType and enforcement mode',
      labelNames: ['stype', 'mode'] as const,
    });
    const resultViolationsTotal = env.metrics.counter({
      name: 'switchyard_result_violations_total',
      help: 'Upstream results that failed their SType output schema, by SType and enforcement mode',
      labelNames: ['stype', 'mode'] as const,
    });
    const refusedSchemaTotal = env.metrics.counter({
      name: 'switchyard_tool_schema_refused_total',
      help: 'tools/list answers listing a tool whose schema is outside the bounds of schema validation, by tool',
      labelNames: ['tool'] as const,
    });
    const driftTotal = env.metrics.counter({
      name: 'switchyard_tool_drift_total',
      help: 'tools/list answers listing a tool whose definition differs from its pinned hash, by tool',
      labelNames: ['tool'] as const,
    });

    /** Validates against an SType schema, compiled on first use; a refused schema fails every value, with the reason. */
    function validateWith(schema: Record<string, unknown>, payload: unknown, root: string, stype: string): Validation {
      let entry = compiled.get(schema);
      if (!entry) {
        entry = compileToolSchema(schema, limits);
        compiled.set(schema, entry);
        if (!entry.ok) log.error({ stype, reason: entry.reason }, 'SType schema refused: every value fails it');
      }
      if (!entry.ok)
        return { valid: false, violations: [{ path: root, message: `its schema is refused: ${entry.reason}` }] };
      return entry.schema.validate(payload, root);
    }

    /** Records a failed validation on the request and counts it; the violations kept (at most maxViolations). */
    function recordFailure(ctx: GatewayContext, mode: Mode, label: string, all: Violation[]): Violation[] {
      const violations = all.slice(0, maxViolations);
      ctx.state.validation = { valid: false, violations };
      violationsTotal.inc({ stype: label, mode });
      return violations;
    }

    function failRequest(ctx: GatewayContext, mode: Mode, stype: string, label: string, all: Violation[]): void {
      const violations = recordFailure(ctx, mode, label, all);
      if (mode === 'strict') {
        recordDecision(ctx, refusal(stype, all.length));
        const details: Record<string, unknown> = { stype, violations };
        if (all.length > maxViolations) details.violations_total = all.length;
        throw new GatewayError('validation_failed', 'Schema validation failed', { details });
      }
      if (mode === 'permissive') {
        // Paths only: violation messages come from the schema, payload values are never logged.
        log.warn(
          {
            request_id: ctx.state.requestId,
            stype,
            violations: all.length,
            paths: violations.slice(0, 10).map((v) => v.path),
          },
          'schema validation failed; forwarded (permissive)',
        );
      }
    }

    function listHook(pinMode: PinCheck): RpcResponseMap {
      return async (response, ctx) => {
        const result = response.result as Record<string, unknown> | undefined;
        if (!isObject(result) || !Array.isArray(result.tools)) return response;
        const withheld = new Set([
          ...driftedTools(ctx, result.tools, pinMode),
          ...(await refusedSchemas(ctx, result.tools, pinMode)),
        ]);
        if (pinMode !== 'enforce' || withheld.size === 0) return response;
        const tools = result.tools.filter((t) => !(isObject(t) && withheld.has(t.name as string)));
        const before = ctx.state.annotations.tools_withheld;
        ctx.state.annotations.tools_withheld = [...(Array.isArray(before) ? before : []), ...withheld];
        return { ...response, result: { ...result, tools } };
      };
    }

    /** Tools whose definition differs from its pin: counted, logged and recorded; their names. */
    function driftedTools(ctx: GatewayContext, tools: unknown[], pinMode: PinCheck): string[] {
      const drifts = pins.observe(tools);
      if (drifts.length === 0) return [];
      const names = drifts.map((d) => d.tool);
      for (const name of names) driftTotal.inc({ tool: name });
      ctx.state.annotations.drifted_tools = names;
      log.warn(
        { request_id: ctx.state.requestId, tools: names, action: pinMode === 'enforce' ? 'removed' : 'flagged' },
        'tool definitions changed since they were approved',
      );
      // On record (the audit trail): a listing with tools whose definition changed since review.
      recordDecision(ctx, {
        action: pinMode === 'enforce' ? 'block' : 'flag',
        phase: 'tools',
        rule: 'tool-pinning',
        detail: 'tool definitions changed since they were approved',
        details: { stage: 'schema-validate', tools: names, withheld: pinMode === 'enforce' },
      });
      return names;
    }

    /** Tools whose schemas are outside the bounds (listed-schemas.ts): counted, logged and recorded with the reasons. */
    async function refusedSchemas(ctx: GatewayContext, tools: unknown[], pinMode: PinCheck): Promise<string[]> {
      const refused = await listed.observe(tools);
      if (refused.length === 0) return [];
      const names = refused.map((r) => r.tool);
      const reasons = Object.fromEntries(refused.map((r) => [r.tool, r.reason]));
      for (const name of names) refusedSchemaTotal.inc({ tool: name });
      ctx.state.annotations.refused_tool_schemas = refused;
      log.warn(
        { request_id: ctx.state.requestId, reasons, action: pinMode === 'enforce' ? 'removed' : 'flagged' },
        'tool schemas refused',
      );
      recordDecision(ctx, {
        action: pinMode === 'enforce' ? 'block' : 'flag',
        phase: 'tools',
        rule: 'tool-schema',
        detail: 'tool schemas outside the bounds of schema validation (SEP-2106)',
        details: { stage: 'schema-validate', tools: names, reasons, withheld: pinMode === 'enforce' },
      });
      return names;
    }

    function checkPinnedCall(ctx: GatewayContext, rpc: JsonRpcRequest, pinMode: PinCheck): void {
      const name = toolCallOf(rpc)?.name;
      if (!name) return;
      const refusal = listed.refused(name);
      if (refusal !== undefined)
        refuseCall(ctx, pinMode, name, 'tool-schema', schemaDetail({ tool: name, reason: refusal }));
      const drift = pins.drift(name);
      if (!drift) return;
      ctx.state.annotations.tool_drift = {
        tool: name,
        pinned: `sha256:${drift.pinned}`,
        observed: `sha256:${drift.observed}`,
      };
      refuseCall(ctx, pinMode, name, 'tool-pinning', driftDetail(drift));
    }

    /** Refuses (enforce) or logs (flag) the call of a tool withheld from the listing. */
    function refuseCall(ctx: GatewayContext, pinMode: PinCheck, tool: string, rule: string, detail: string): void {
      if (pinMode === 'enforce') {
        recordDecision(ctx, {
          action: 'block',
          phase: 'ingress',
          rule,
          detail,
          details: { stage: 'schema-validate', tool },
        });
        // The fixed JSON-RPC message, so that the body is exactly {policy, detail} (no extra reason).
        throw new GatewayError('policy_violation', 'Policy violation', { details: { policy: rule, detail } });
      }
      log.warn({ request_id: ctx.state.requestId, tool, rule }, `call of a tool flagged by ${rule}`);
    }

    /** Checks the result against the SType's output schema (made once: the SType and mode come from the request). */
    const checkResult: RpcResponseMap = (response, ctx) => {
      const stype = (ctx.state.stype as ResolvedSType).id;
      const mode = effectiveMode(options.mode, ctx.state.mode);
      const result = response.result;
      // Errors, MCP tool errors (isError) and a round asking for input (MCP 2026-07-28
      // input_required: the result comes with a later round) carry no structured result to check.
      if (!isObject(result) || result.isError === true || result.resultType === 'input_required') return response;
      const structured = result.structuredContent !== undefined;
      const schema = registry.get(stype)?.output_schema;
      if (!schema) return response;
      const outcome = validateWith(
        schema,
        structured ? result.structuredContent : result,
        structured ? '$.result.structuredContent' : '$.result',
        stype,
      );
      const violations = outcome.violations.slice(0, maxViolations);
      ctx.state.resultValidation = { valid: outcome.valid, violations };
      if (outcome.valid) return response;
      resultViolationsTotal.inc({ stype, mode });
      if (mode !== 'audit') {
        log.warn(
          { request_id: ctx.state.requestId, stype, violations: outcome.violations.length, mode },
          mode === 'strict'
            ? 'upstream result failed its output schema; replaced'
            : 'upstream result failed its output schema',
        );
      }
      if (mode !== 'strict') return response;
      return {
        jsonrpc: '2.0',
        id: response.id ?? null,
        error: { code: resultErrorCode, message: 'Result validation failed', data: { stype, violations } },
      };
    };
    const listChecks: Record<'flag' | 'enforce', RpcResponseMap> = {
      flag: listHook('flag'),
      enforce: listHook('enforce'),
    };

    return {
      // No async frame: most requests have no answer phase here (docs/performance.md, "Work per request").
      handle: syncStage((ctx, next) => {
        const rpc = ctx.state.rpc;
        if (!rpc) return next();
        const mode = effectiveMode(options.mode, ctx.state.mode);
        const pinMode = options.pin_check ?? (mode === 'strict' ? 'enforce' : 'flag');
        if (pinMode !== 'off' && rpc.method === 'tools/call') checkPinnedCall(ctx, rpc, pinMode);

        const { payload, root } = messagePayload(rpc);
        const stype = ctx.state.stype;
        const schema = stype ? registry.get(stype.id)?.schema : undefined;
        const outcome = stype && schema ? validateWith(schema, payload, root, stype.id) : undefined;
        if (!stype || !outcome) {
          if (options.unknown_stype === 'allow') {
            ctx.state.validation = { valid: true, violations: [] };
            ctx.state.annotations.schema_validation = 'skipped: no SType';
          } else {
            const id = stype?.id ?? unknownId(rpc, registry);
            failRequest(ctx, mode, id, 'unknown', [
              { path: '$', message: `no SType is registered for ${describe(rpc)}` },
            ]);
          }
        } else if (outcome.valid) ctx.state.validation = { valid: true, violations: [] };
        else if (mode === 'strict' && options.argument_errors === 'tool-result' && toolCallOf(rpc) && 'id' in rpc) {
          // Counted and recorded like any failure; answered as the tool's own error, not forwarded.
          const violations = recordFailure(ctx, mode, stype.id, outcome.violations);
          recordDecision(ctx, refusal(stype.id, outcome.violations.length, 'tool-result'));
          ctx.state.answer = Answer.fromJson(ctx, toolError(rpc, stype.id, violations, outcome.violations.length));
          return answered;
        } else failRequest(ctx, mode, stype.id, stype.id, outcome.violations);

        // The answer phase: the tools the upstream lists (pins), the result (output schema).
        const listCheck = pinMode !== 'off' && rpc.method === 'tools/list' ? listChecks[pinMode] : undefined;
        const results = stype && outcome && options.validate_results && registry.get(stype.id)?.output_schema;
        if (!listCheck && !results) return next();
        return next().then(async () => {
          if (listCheck) await mapRpcResponses(ctx, listCheck);
          if (results) await mapRpcResponses(ctx, checkResult);
        });
      }),
      describe: () => ({
        mode: options.mode ?? 'route',
        validate_results: options.validate_results,
        unknown_stype: options.unknown_stype,
        pin_check: options.pin_check ?? 'flag (enforce in strict mode)',
        tools_observed: pins.observedCount,
        schemas: limits,
      }),
    };
  },
});

/** What the stage returns when it answered itself (no next): nothing to wait for. */
const answered: Promise<void> = Promise.resolve();

function driftDetail(d: Drift): string {
  return `the definition of tool "${d.tool}" changed since it was approved (pinned sha256:${d.pinned}, upstream now lists sha256:${d.observed})`;
}

function schemaDetail(r: RefusedTool): string {
  return `the schemas of tool "${r.tool}" are refused (${r.reason})`;
}

function describe(rpc: JsonRpcRequest): string {
  const tool = toolCallOf(rpc)?.name;
  return typeof tool === 'string' ? `tool "${tool}"` : `method "${rpc.method}"`;
}

function unknownId(rpc: JsonRpcRequest, registry: STypeRegistry): string {
  const tool = toolCallOf(rpc)?.name;
  return (typeof tool === 'string' ? registry.idForTool(tool) : undefined) ?? rpc.method;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * The answer to a tools/call whose arguments fail their schema, as a tool execution error (MCP
 * 2025-11-25, SEP-1303): a result with `isError: true` whose text names each violation, so that
 * the model can correct its call; the violations also in `_meta` for programs.
 */
function toolError(
  rpc: JsonRpcRequest,
  stype: string,
  violations: Violation[],
  total: number,
): Record<string, unknown> {
  const name = toolCallOf(rpc)?.name ?? 'the tool';
  const lines = violations.map((v) => `${v.path}: ${v.message}`);
  if (total > violations.length) lines.push(`(${total - violations.length} more)`);
  return {
    jsonrpc: '2.0',
    id: rpc.id ?? null,
    result: {
      content: [{ type: 'text', text: `Invalid arguments for tool "${name}":\n${lines.join('\n')}` }],
      isError: true,
      _meta: { 'io.switchyard/validation': { stype, violations, violations_total: total } },
    },
  };
}

/** The decision of a strict schema refusal (for the audit trail: the SType and how many violations). */
function refusal(stype: string, violations: number, answeredAs?: 'tool-result'): PolicyDecision {
  return {
    action: 'block',
    phase: 'ingress',
    rule: 'schema-validation',
    detail: 'Schema validation failed',
    details: { stage: 'schema-validate', stype, violations, ...(answeredAs ? { answered_as: answeredAs } : {}) },
  };
}
