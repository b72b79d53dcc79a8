/**
 * Plugin options: one JSON Schema per plugin is the only source of truth. The loader validates
 * config options against it (defaults written in, `x-ref` names checked), and `definePlugin` /
 * `defineResource` apply the same schema again before every `create`, so a plugin's `create`
 * always sees its defaults, whoever calls it: the service graph, a hot reload, or a test calling
 * `plugin.create({...})` directly. The TypeScript type of the options is inferred from the same
 * schema (`FromSchema`, runtime/config/from-schema.ts).
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { referenceKeyword } from './references.ts';

// passContext: option validators run with the config's DeclaredNames as `this` (for `x-ref`).
// verbose: errors carry their schema, for "did you mean" among the allowed names and values.
const ajv = new Ajv2020({
  allErrors: true,
  useDefaults: true,
  coerceTypes: true,
  strict: false,
  passContext: true,
  verbose: true,
});
addFormats.default(ajv);
ajv.addKeyword(referenceKeyword);
const compiled = new WeakMap<object, ValidateFunction>();

/** The validate function of a schema (compiled once per schema object); it writes defaults in. */
export function compileSchema(schema: object): ValidateFunction {
  let fn = compiled.get(schema);
  if (!fn) {
    fn = ajv.compile(schema);
    compiled.set(schema, fn);
  }
  return fn;
}

/**
 * A copy of `options` validated against `schema`, its defaults applied (ajv `useDefaults`, at any
 * depth). Throws, naming each problem, when the options do not fit the schema: a stage built from
 * options its schema refuses would run on values nobody checked.
 */
export function withDefaults<O>(schema: object, options: unknown, owner: string): O {
  const copy = options === undefined ? {} : structuredClone(options);
  const validate = compileSchema(schema);
  if (!validate(copy)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? e.keyword}`);
    throw new Error(`${owner}: invalid options: ${problems.join('; ')}`);
  }
  return copy as O;
}
