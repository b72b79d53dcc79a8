/**
 * Properties of schema-validate's bounds on tool schemas (plugins/schema-validate/schema-inspect.ts):
 * - nested composition of any mix of applicators is refused exactly when it is nested deeper
 *   than max_depth, with the reason;
 * - the counted cost is an upper bound of the work: an ajv whose every subschema counts its own
 *   evaluations never counts more than cost per value × values, whatever the schema and value;
 * - a value over the budget is refused before anything is evaluated.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { overBudget, work } from '../../plugins/schema-validate/schema-budget.ts';
import { defaultLimits, inspectSchema } from '../../plugins/schema-validate/schema-inspect.ts';
import { compileToolSchema } from '../../plugins/schema-validate/tool-schema.ts';

type Schema = Record<string, unknown>;

/** One level of composition around `inner`, by applicator. */
const wrappers: Array<(inner: Schema) => Schema> = [
  (s) => ({ allOf: [s] }),
  (s) => ({ anyOf: [s, { type: 'null' }] }),
  (s) => ({ oneOf: [{ type: 'null' }, s] }),
  (s) => ({ not: s }),
  // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
  (s) => ({ if: s, then: { type: 'string' } }),
  (s) => ({ if: { type: 'string' }, else: s }),
  (s) => ({ dependentSchemas: { a: s } }),
  (s) => ({ properties: { a: s } }),
  (s) => ({ items: s }),
  (s) => ({ prefixItems: [s] }),
  (s) => ({ additionalProperties: s }),
  (s) => ({ contains: s }),
  (s) => ({ unevaluatedProperties: s }),
];

const nesting = fc.array(fc.integer({ min: 0, max: wrappers.length - 1 }), { minLength: 1, maxLength: 60 });

describe('composition depth', () => {
  it('property: any nesting is refused exactly when deeper than max_depth', () => {
    fc.assert(
      fc.property(nesting, fc.integer({ min: 1, max: 64 }), (levels, maxDepth) => {
        let schema: Schema = { type: 'string' };
        for (const i of levels) schema = wrappers[i](schema);
        const inspection = inspectSchema(
          { type: 'object', properties: { q: schema } },
          { ...defaultLimits, max_depth: maxDepth },
        );
        // The root is level 0, `q` level 1, then one level per wrapper (and the innermost schema).
        const depth = levels.length + 1;
        if (depth > maxDepth) {
          expect(inspection.ok).toBe(false);
          expect(inspection.ok ? '' : inspection.reason).toContain(`nested deeper than ${maxDepth} levels`);
        } else {
          expect(inspection.ok).toBe(true);
          if (inspection.ok) expect(inspection.depth).toBe(depth);
        }
      }),
      { numRuns: 300 },
    );
  });
});

/** Random schemas of every applicator, references included; each subschema counts its evaluations. */
const leaf = fc.constantFrom<Schema>(
  { type: 'string' },
  { type: 'number', minimum: 0 },
  { type: 'object' },
  { type: 'array' },
  { enum: [1, 'a', null] },
  { $ref: '#/$defs/shared' },
  {},
);
const { schema: arbitrarySchema } = fc.letrec<{ schema: Schema }>((tie) => ({
  schema: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.array(tie('schema'), { minLength: 1, maxLength: 3 }).map((xs) => ({ allOf: xs })),
    fc.array(tie('schema'), { minLength: 1, maxLength: 3 }).map((xs) => ({ anyOf: xs })),
    fc.array(tie('schema'), { minLength: 1, maxLength: 3 }).map((xs) => ({ oneOf: xs })),
    tie('schema').map((s) => ({ not: s })),
    // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
    fc.tuple(tie('schema'), tie('schema'), tie('schema')).map(([i, t, e]) => ({ if: i, then: t, else: e })),
    fc.tuple(tie('schema'), tie('schema')).map(([a, b]) => ({ properties: { a, b } })),
    tie('schema').map((s) => ({ items: s })),
    tie('schema').map((s) => ({ prefixItems: [s], items: { type: 'number' } })),
    tie('schema').map((s) => ({ additionalProperties: s })),
    tie('schema').map((s) => ({ patternProperties: { '^x': s } })),
    tie('schema').map((s) => ({ dependentSchemas: { a: s } })),
    tie('schema').map((s) => ({ contains: s })),
  ),
}));

/** The schema with `x-visit` on every subschema object (what the counting ajv counts). */
function instrument(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(instrument);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'enum' || k === 'const') out[k] = v;
    else if (k === 'properties' || k === 'patternProperties' || k === 'dependentSchemas' || k === '$defs') {
      out[k] = Object.fromEntries(Object.entries(v as Schema).map(([n, s]) => [n, instrument(s)]));
    } else out[k] = instrument(v);
  }
  out['x-visit'] = true;
  return out;
}

describe('counted work', () => {
  it('property: the evaluations ajv makes never exceed cost per value × values', () => {
    let evaluations = 0;
    const counting = new Ajv2020({ allErrors: true, strict: false, inlineRefs: false });
    counting.addKeyword({
      keyword: 'x-visit',
      validate: () => {
        evaluations++;
        return true;
      },
    });
    fc.assert(
      fc.property(arbitrarySchema, fc.jsonValue({ maxDepth: 4 }), (body, value) => {
        const schema = { $defs: { shared: { type: 'string', minLength: 1 } }, ...body };
        const inspection = inspectSchema(schema, defaultLimits);
        if (!inspection.ok) return; // a generated schema over the bounds (a deep one): nothing to count
        const check = counting.compile(instrument(schema) as Schema);
        evaluations = 0;
        check(value);
        counting.removeSchema(check.schema as Schema);
        const nodes = countNodes(value);
        const depth = depthOf(value);
        expect(evaluations).toBeLessThanOrEqual(work(inspection.cost, { nodes, chars: 0, depth }));
      }),
      { numRuns: 400 },
    );
  });

  it('property: a value over the budget is refused without evaluating it', () => {
    const compiled = compileToolSchema(
      {
        type: 'object',
        properties: { xs: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'number' }] } } },
      },
      { ...defaultLimits, max_work: 10_000 },
    );
    if (!compiled.ok) throw new Error(compiled.reason);
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.string(), fc.integer()), { maxLength: 400 }), (xs) => {
        const value = { xs };
        const over = overBudget(compiled.schema.cost, value, 10_000);
        const outcome = compiled.schema.validate(value, '$');
        if (over) expect(outcome).toEqual({ valid: false, violations: [{ path: '$', message: over }] });
        else expect(outcome.valid).toBe(true);
      }),
      { numRuns: 200 },
    );
  });
});

function countNodes(v: unknown): number {
  if (Array.isArray(v)) return 1 + v.reduce((n: number, x) => n + countNodes(x), 0);
  if (v !== null && typeof v === 'object') return 1 + Object.values(v).reduce((n: number, x) => n + countNodes(x), 0);
  return 1;
}

function depthOf(v: unknown): number {
  const children = Array.isArray(v) ? v : v !== null && typeof v === 'object' ? Object.values(v) : [];
  return children.reduce((d: number, x) => Math.max(d, 1 + depthOf(x)), 0);
}
