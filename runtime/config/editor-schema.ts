/**
 * The published schema as an editor meets a config file: before interpolation and before YAML
 * merge keys are applied. Wherever a scalar with a type, a choice or a format is expected, a
 * `${VAR}` / `${VAR:-default}` string is accepted too (its value is checked at load, when it is
 * known); every mapping may carry a `<<` merge key (`<<: *anchor`). Without this every shipped
 * config showed hundreds of false errors in yaml-language-server (`port: "${PORT:-8080}"`).
 */

type Schema = Record<string, unknown>;

/** A string that interpolates a variable somewhere (runtime/config/interpolate.ts). */
export const INTERPOLATED: Schema = {
  type: 'string',
  pattern: '\\$\\{[A-Za-z_][A-Za-z0-9_]*',
  description: 'A ${VAR} or ${VAR:-default} reference, checked once the variable is known.',
};

/** Keywords whose value is one subschema, or a list or map of them. */
const ONE = ['items', 'additionalProperties', 'not', 'if', 'then', 'else', 'contains', 'propertyNames'];
const LIST = ['anyOf', 'oneOf', 'allOf', 'prefixItems'];
const MAP = ['properties', 'patternProperties', '$defs', 'definitions'];

/** Annotations kept on the outside of a wrapped scalar, for hover text and completion. */
const ANNOTATIONS = ['description', 'title', 'default', 'examples', 'deprecated', 'markdownDescription'];

/**
 * `listPaths`: lists the loader also takes as one string (runtime/config/string-lists.ts, e.g.
 * `hosts.allow: "${HOSTS_ALLOW:-}"`), accepted as a string here too.
 */
export function editorSchema(schema: Schema, listPaths: ReadonlyArray<readonly string[]> = []): Schema {
  const out = visit(schema);
  for (const path of listPaths) {
    let parent: Schema | undefined = out;
    for (const key of path.slice(0, -1)) parent = (parent?.properties as Record<string, Schema> | undefined)?.[key];
    const props = parent?.properties as Record<string, Schema> | undefined;
    const last = path.at(-1) as string;
    const list = props?.[last];
    if (props && list) {
      const { description, default: fallback, ...rest } = list;
      props[last] = {
        description,
        default: fallback,
        anyOf: [rest, { type: 'string', description: 'The list as one string: comma- or space-separated, or JSON.' }],
      };
    }
  }
  return out;
}

function visit(node: unknown): Schema {
  if (!node || typeof node !== 'object' || Array.isArray(node)) return node as Schema;
  const out: Schema = { ...(node as Schema) };
  for (const k of ONE) if (isSchema(out[k])) out[k] = visit(out[k]);
  for (const k of LIST) if (Array.isArray(out[k])) out[k] = (out[k] as unknown[]).map(visit);
  for (const k of MAP) {
    if (out[k] && typeof out[k] === 'object') {
      out[k] = Object.fromEntries(Object.entries(out[k] as Schema).map(([name, s]) => [name, visit(s)]));
    }
  }
  if (isObjectSchema(out) && out.additionalProperties === false) {
    out.properties = { ...((out.properties as Schema) ?? {}), '<<': { description: 'YAML merge key (<<: *anchor)' } };
  }
  return isCheckedScalar(out) ? wrap(out) : out;
}

function isSchema(v: unknown): boolean {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

function isObjectSchema(s: Schema): boolean {
  return s.type === 'object' || s.properties !== undefined;
}

/** A scalar the raw text could give as a variable: a number, a boolean, a choice, a constrained string. */
function isCheckedScalar(s: Schema): boolean {
  const types = Array.isArray(s.type) ? s.type : [s.type];
  if (types.some((t) => t === 'object' || t === 'array') || isObjectSchema(s) || s.items !== undefined) return false;
  if (types.some((t) => t === 'integer' || t === 'number' || t === 'boolean')) return true;
  if (s.enum !== undefined || s.const !== undefined) return true;
  return types.includes('string') && ['pattern', 'format', 'minLength', 'maxLength'].some((k) => s[k] !== undefined);
}

function wrap(s: Schema): Schema {
  const outer: Schema = {};
  const inner: Schema = {};
  for (const [k, v] of Object.entries(s)) (ANNOTATIONS.includes(k) ? outer : inner)[k] = v;
  return { ...outer, anyOf: [inner, INTERPOLATED] };
}
