/**
 * Hostile tool schemas against schema-validate's bounds (plugins/schema-validate, SEP-2106): for
 * each case, the time to refuse it (inspection), or, when its bounds admit it, the time to compile
 * it and to validate the largest value the work budget lets through (the worst a client can make
 * the proxy do with it), beside the time to refuse a value just over the budget; then, per shape
 * of schema, the largest one the compile bound (`max_compile`) admits, compiled: the first-error
 * validator (at the schema's first use) and the every-error one (at its first failure), both on
 * the event loop. Target: every line within 50 ms (each is marked ok or OVER). Baseline, in the
 * same run and interleaved: the echo tool's schema on its own small argument, and the same
 * largest values against plain ajv where plain ajv terminates.
 *
 *   npx tsx bench/typed-proxy/hostile-schema.ts [rounds=5]
 *
 * Times are medians of the rounds, of CPU time (BENCH_CLOCK=wall: of the wall clock); the
 * machine's load moves them, not the work counted.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { overBudget } from '../../plugins/schema-validate/schema-budget.ts';
import { defaultLimits, inspectSchema } from '../../plugins/schema-validate/schema-inspect.ts';
import { compileToolSchema, type ToolSchema, warmToolSchemas } from '../../plugins/schema-validate/tool-schema.ts';
import { alternatives, refExplosion } from '../../test/helpers/hostile-schemas.ts';

const rounds = Number(process.argv[2] ?? 5);
const limits = defaultLimits;

const nest = (key: 'allOf' | 'anyOf' | 'oneOf', depth: number) => {
  let s: unknown = { type: 'string' };
  for (let i = 0; i < depth; i++) s = { [key]: [s, { type: 'string' }] };
  return { type: 'object', properties: { a: s } };
};
/** An array whose every item is tried against `n` alternatives. */

/** The largest n whose schema the bounds admit (its compile work within max_compile). */
function largestAdmitted(schema: (n: number) => unknown): number {
  let n = 1;
  while (n < 1 << 16 && inspectSchema(schema(n * 2), limits).ok) n *= 2;
  let hi = n * 2;
  while (hi - n > 1) {
    const mid = (n + hi) >> 1;
    if (inspectSchema(schema(mid), limits).ok) n = mid;
    else hi = mid;
  }
  return n;
}

/** Refused at pin time: the time to say so. */
const refused: Record<string, unknown> = {
  'allOf nested 1000 deep': nest('allOf', 1000),
  'anyOf nested 10000 deep': nest('anyOf', 10_000),
  '50,000 subschemas': { type: 'object', anyOf: Array.from({ length: 50_000 }, () => ({ type: 'object' })) },
  'remote $ref (https URL)': { type: 'object', properties: { a: { $ref: 'https://attacker.example/s.json' } } },
  '$ref explosion (2^60 paths)': refExplosion(60),
  'lookahead pattern': { type: 'object', properties: { a: { type: 'string', pattern: '^(?=(a+)+$)' } } },
  '4 MB schema': { type: 'object', description: 'x'.repeat(4_000_000) },
  'anyOf of 600 alternatives on every item': alternatives(600),
  'anyOf of 1,900 alternatives on every item': alternatives(1900),
};

/** Admitted by the bounds: validation of the largest value under the budget. */
const bounded: Record<string, { schema: unknown; value: (n: number) => unknown; plain: boolean }> = {
  'catastrophic pattern ^(a+)+$ on a long string': {
    schema: { type: 'object', properties: { a: { type: 'string', pattern: '^(a+)+$' } } },
    value: (n) => ({ a: `${'a'.repeat(n)}!` }),
    plain: false,
  },
  [`anyOf of ${largestAdmitted(alternatives)} alternatives on every item (max_compile)`]: {
    schema: alternatives(largestAdmitted(alternatives)),
    value: (n) => ({ a: Array.from({ length: n }, () => ({ z: 1 })) }),
    plain: true,
  },
  'allOf nested 30 deep, every level on every item': {
    schema: { type: 'object', properties: { a: { type: 'array', items: nest('allOf', 30).properties.a } } },
    value: (n) => ({ a: Array.from({ length: n }, () => 'x') }),
    plain: true,
  },
  '$ref doubling 16 levels (65,536 paths)': {
    schema: refExplosion(16),
    value: (n) => ({ a: 'x'.repeat(n) }),
    plain: true,
  },
  'uniqueItems over objects': {
    schema: { type: 'object', properties: { a: { type: 'array', uniqueItems: true } } },
    value: (n) => ({ a: Array.from({ length: n }, (_, i) => ({ i })) }),
    plain: true,
  },
  'recursive tree, every node': {
    schema: {
      type: 'object',
      $defs: {
        node: {
          type: 'object',
          properties: { v: { type: 'integer', minimum: 0 }, kids: { type: 'array', items: { $ref: '#/$defs/node' } } },
        },
      },
      properties: { root: { $ref: '#/$defs/node' } },
    },
    value: (n) => ({ root: { v: 1, kids: Array.from({ length: n }, (_, i) => ({ v: i, kids: [] })) } }),
    plain: true,
  },
};

/** Shapes of schema at the compile bound: each generates different code (per unit, 50-120 µs measured). */
const props = (n: number, f: (i: number) => unknown) =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, f(i)]));
const shapes: Record<string, (n: number) => unknown> = {
  'anyOf alternatives': alternatives,
  'string properties': (n) => ({ type: 'object', properties: props(n, () => ({ type: 'string', description: 'd' })) }),
  'properties with pattern, format, lengths': (n) => ({
    type: 'object',
    properties: props(n, (i) => ({ type: 'string', pattern: `^a${i}$`, format: 'email', minLength: 1, maxLength: 9 })),
  }),
  patterns: (n) => ({ type: 'object', properties: props(n, (i) => ({ pattern: `^(a|b${i})+c?$` })) }),
  formats: (n) => ({
    type: 'object',
    properties: props(n, (i) => ({ format: ['email', 'uri', 'date-time', 'ipv6'][i % 4] })),
  }),
  '$refs to $defs': (n) => ({
    type: 'object',
    $defs: props(n, () => ({ type: 'string' })),
    properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { $ref: `#/$defs/p${i}` }])),
  }),
  '$ref doubling': (n) => refExplosion(n),
  'allOf nested 20 deep, per property': (n) => ({
    type: 'object',
    properties: props(n, () => nest('allOf', 20).properties.a),
  }),
  'oneOf of closed objects': (n) => ({
    type: 'object',
    oneOf: Array.from({ length: n }, (_, i) => ({
      properties: { kind: { const: `k${i}` }, v: { type: 'integer', minimum: 0 } },
      required: ['kind'],
      additionalProperties: false,
    })),
  }),
  'if/then/else': (n) => ({
    type: 'object',
    allOf: Array.from({ length: n }, (_, i) => ({
      if: { properties: { k: { const: i } } },
      // biome-ignore lint/suspicious/noThenProperty: a JSON Schema keyword
      then: { required: [`p${i}`] },
      else: { not: { required: [`q${i}`] } },
    })),
  }),
  unevaluatedProperties: (n) => ({
    type: 'object',
    anyOf: Array.from({ length: n }, (_, i) => ({ properties: { [`p${i}`]: { type: 'string' } } })),
    unevaluatedProperties: false,
  }),
  $dynamicRef: (n) => ({
    $dynamicAnchor: 'node',
    type: 'object',
    properties: props(n, () => ({ type: 'array', items: { $dynamicRef: '#node' } })),
  }),
};

const warmUp = time(() => warmToolSchemas());

const echo = compileToolSchema(
  { type: 'object', properties: { message: { type: 'string' } }, required: ['message'], additionalProperties: false },
  limits,
);
if (!echo.ok) throw new Error(echo.reason);

/**
 * CPU time of the process (user + system), ms: on a loaded machine the wall clock also counts the
 * time other processes held the core, which a quiet server does not pay. V8's helper threads (GC)
 * count too: a bound from above of what the event loop spent. `BENCH_CLOCK=wall` times the wall.
 */
function time(f: () => unknown): number {
  if (process.env.BENCH_CLOCK === 'wall') {
    const t = process.hrtime.bigint();
    f();
    return Number(process.hrtime.bigint() - t) / 1e6;
  }
  const t = process.cpuUsage();
  f();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / 1000;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x: number) => `${x.toFixed(2).padStart(8)} ms`;
const target = 50;
/** Against the target: every time a line reports that the event loop is held for. */
const mark = (...xs: number[]) => (xs.every((x) => x <= target) ? '  ok  ' : '  OVER');

/** The largest n whose value is within the budget (doubling, then bisecting). */
function largest(schema: ToolSchema, value: (n: number) => unknown): number {
  let lo = 1;
  let hi = 2;
  while (!overBudget(schema.cost, value(hi), limits.max_work)) {
    lo = hi;
    hi *= 2;
    if (hi > 1 << 24) return lo;
  }
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (overBudget(schema.cost, value(mid), limits.max_work)) hi = mid;
    else lo = mid;
  }
  return lo;
}

console.log(
  `bounds: ${JSON.stringify(limits)}; ${rounds} rounds, medians of ${process.env.BENCH_CLOCK === 'wall' ? 'wall' : 'CPU'} time; target ${target} ms per line\n`,
);
console.log(`ajv warm-up (warmToolSchemas, before the service serves; not on a request): ${ms(warmUp)}\n`);
console.log('refused at pin time (inspection)');
for (const [name, schema] of Object.entries(refused)) {
  const times: number[] = [];
  const baseline: number[] = [];
  let reason = '';
  for (let r = 0; r < rounds; r++) {
    baseline.push(time(() => echo.schema.validate({ message: 'hi' }, '$')));
    times.push(
      time(() => {
        const i = inspectSchema(schema, limits);
        reason = i.ok ? 'ADMITTED' : i.reason;
      }),
    );
  }
  console.log(
    `${mark(median(times))} ${name.padEnd(48)} ${ms(median(times))}  (echo baseline ${ms(median(baseline))})  ${reason.slice(0, 90)}`,
  );
}

console.log('\nbounded: compile once, then the largest value under the budget, and one just over it');
for (const [name, c] of Object.entries(bounded)) {
  let compiled: ReturnType<typeof compileToolSchema> | undefined;
  const compileTimes: number[] = [];
  for (let r = 0; r < rounds; r++) compileTimes.push(time(() => (compiled = compileToolSchema(c.schema, limits))));
  if (!compiled?.ok) {
    console.log(
      `${mark(median(compileTimes))} ${name.padEnd(48)} refused in ${ms(median(compileTimes))}: ${compiled?.reason}`,
    );
    continue;
  }
  const schema = compiled.schema;
  const n = largest(schema, c.value);
  const value = c.value(n);
  const over = c.value(n * 2 + 1);
  const plain = c.plain ? new Ajv2020({ allErrors: true, strict: false }).compile(c.schema as object) : undefined;
  const valid: number[] = [];
  const refuse: number[] = [];
  const base: number[] = [];
  for (let r = 0; r < rounds; r++) {
    valid.push(time(() => schema.validate(value, '$')));
    refuse.push(time(() => schema.validate(over, '$')));
    if (plain) base.push(time(() => plain(value)));
  }
  console.log(
    `${mark(median(compileTimes), median(valid), median(refuse))} ${name.padEnd(48)} compile ${ms(median(compileTimes))}  n=${String(n).padStart(8)}  validate ${ms(median(valid))}  over budget ${ms(median(refuse))}  plain ajv ${plain ? ms(median(base)) : '(would not finish)'}`,
  );
}

console.log(
  `\ncompile at the bound (max_compile ${limits.max_compile}): the largest schema of each shape admitted, its first-error validator, then its every-error one (a failing value)`,
);
for (const [name, shape] of Object.entries(shapes)) {
  const n = largestAdmitted(shape);
  const inspection = inspectSchema(shape(n), limits);
  const units = inspection.ok ? inspection.compile : 0;
  const first: number[] = [];
  const all: number[] = [];
  for (let r = 0; r < rounds; r++) {
    let c: ReturnType<typeof compileToolSchema> | undefined;
    first.push(time(() => (c = compileToolSchema(shape(n), limits))));
    if (!c?.ok) throw new Error(`${name}: ${c?.reason}`);
    const compiled = c.schema;
    // 42 fails `type: object` at once: the time is the every-error validator's compile.
    all.push(time(() => compiled.validate(42, '$')));
  }
  console.log(
    `${mark(median(first), median(all))} ${name.padEnd(48)} n=${String(n).padStart(5)}  ${String(units).padStart(4)} units  first-error ${ms(median(first))}  every-error ${ms(median(all))}`,
  );
}
