/**
 * A tool schema made ready to validate with: inspected (schema-inspect.ts), then compiled by ajv
 * for its dialect (2020-12, or draft-07 when its `$schema` says so; shared ajvs) with every pattern on the
 * linear engine, references never inlined (a reference's cost is counted once per use, and the
 * generated code stays the size of the schema) and never loaded (ajv has no `loadSchema` here:
 * the inspection already refused any reference that leaves the document). Validation runs only
 * under the budget (schema-budget.ts); over it, the value fails with the reason.
 */
import type { Options, ValidateFunction } from 'ajv';
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { toViolations, type Violation } from '../../runtime/index.ts';
import { type Dialect, supportedDialects } from './dialect.ts';
import { ajvLinearRegExp } from './linear-regexp.ts';
import { overBudget } from './schema-budget.ts';
import { type Cost, FAILURE, inspectSchema, type SchemaLimits } from './schema-inspect.ts';

export interface Validation {
  valid: boolean;
  violations: Violation[];
}

export interface ToolSchema {
  /** Validates a value; `root` prefixes the violation paths (`$.arguments`). */
  validate(value: unknown, root: string): Validation;
  readonly cost: Cost;
}

export type Compiled = { ok: true; schema: ToolSchema } | { ok: false; reason: string };

/**
 * `code.optimize: false`: ajv's optimizing pass over the generated code grows with the square of
 * the checks in one function (1,600 string properties compiled in 1.8 s with it, 0.33 s without,
 * CPU time on this machine, loaded); V8 optimizes the code it runs either way.
 */
const base: Options = { strict: false, inlineRefs: false, code: { regExp: ajvLinearRegExp, optimize: false } };

const canonical: Record<Dialect, string> = { '2020-12': supportedDialects[0], 'draft-07': supportedDialects[1] };

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Violations converted at most (the first ones: a client fixes those, then sees the next). */
const maxCollected = 1000;

/**
 * Two ajvs per dialect, made on first use: `first` stops at the first error, the verdict; `all`
 * collects every error, for the client to read, compiled and run only on a value that failed and
 * is small enough for its cost (every check may then build an error: `FAILURE` times the
 * budget's work). `first` checks the schema against its meta-schema (compiling that meta-schema
 * is the first compile's extra 200-400 ms: `warmToolSchemas` pays it before the service serves);
 * `all` compiles only what `first` compiled, so it skips the check.
 */
const instances = new Map<string, Ajv>();

function instance(dialect: Dialect, allErrors: boolean): Ajv {
  const key = `${dialect} ${allErrors}`;
  let ajv = instances.get(key);
  if (!ajv) {
    const options = { ...base, allErrors, validateSchema: !allErrors };
    ajv = dialect === 'draft-07' ? new Ajv(options) : new Ajv2020(options);
    addFormats.default(ajv);
    instances.set(key, ajv);
  }
  return ajv;
}

function compileWith(ajv: Ajv, schema: unknown): ValidateFunction {
  try {
    return ajv.compile(schema as object | boolean);
  } finally {
    // The validator keeps what it needs; the shared ajv keeps nothing (a reload compiles anew, ids may repeat).
    if (typeof schema === 'object') ajv.removeSchema(schema as object);
  }
}

/**
 * Makes the ajvs of both dialects and compiles a small schema with each, so that the meta-schema
 * compile (a few hundred ms, once per process) happens now and not on a request: call it before
 * the service serves. Idempotent (the ajvs are shared by the process).
 */
let warmed = false;

export function warmToolSchemas(): void {
  if (warmed) return;
  warmed = true;
  for (const dialect of Object.keys(canonical) as Dialect[]) {
    for (const allErrors of [false, true]) compileWith(instance(dialect, allErrors), { type: 'object' });
  }
}

/** Inspects and compiles a schema; a refusal carries the reason. Compiling is once per schema (callers keep it). */
export function compileToolSchema(schema: unknown, limits: SchemaLimits): Compiled {
  const inspection = inspectSchema(schema, limits);
  if (!inspection.ok) return inspection;
  const { cost, dialect } = inspection;
  // ajv knows each meta-schema by one URI: the spellings dialect.ts accepts (http/https, with or
  // without `#`) are written as that one, on a shallow copy.
  const source = isObject(schema) && '$schema' in schema ? { ...schema, $schema: canonical[dialect] } : schema;
  let first: ValidateFunction;
  try {
    first = compileWith(instance(dialect, false), source);
  } catch (err) {
    return { ok: false, reason: `is not a valid JSON Schema: ${(err as Error).message}` };
  }
  let all: ValidateFunction | undefined;
  return {
    ok: true,
    schema: {
      cost,
      validate(value, root) {
        const over = overBudget(cost, value, limits.max_work);
        if (over) return { valid: false, violations: [{ path: root, message: over }] };
        if (first(value)) return { valid: true, violations: [] };
        if (overBudget(cost, value, limits.max_work / FAILURE)) {
          // Too large to list every violation within the budget: the first one, and that there may be more.
          const violations = toViolations(first.errors, value, root, maxCollected);
          violations.push({ path: root, message: 'may have more violations: too large to list them all' });
          return { valid: false, violations };
        }
        all ??= compileWith(instance(dialect, true), source);
        all(value);
        return { valid: false, violations: toViolations(all.errors, value, root, maxCollected) };
      },
    },
  };
}
