/**
 * What QoM scoring needs to know about an SType schema, worked out once per schema object (the
 * registry compiles its schemas at load; a registry reload brings new objects, so the WeakMap
 * forgets the old ones by itself).
 */

export type JsonObject = Record<string, unknown>;

export interface PropertyInfo {
  name: string;
  required: boolean;
  /** The property's subschema, local `$ref`s resolved. */
  schema: JsonObject;
}

export interface SchemaInfo {
  properties: Map<string, PropertyInfo>;
  required: number;
  optional: number;
  /** Pairs of declared properties that must be ordered (`min_x` ≤ `max_x`, `start` ≤ `end`...). */
  orderedPairs: Array<[low: string, high: string]>;
  /** Number of checkable constraints in the schema (denominator of schema_conform), at least 1. */
  constraints: number;
}

const cache = new WeakMap<object, SchemaInfo>();

export function schemaInfo(schema: JsonObject): SchemaInfo {
  let info = cache.get(schema);
  if (!info) {
    info = analyse(schema);
    cache.set(schema, info);
  }
  return info;
}

/** Nested object properties of a subschema (for relevance of nested keys). */
export function nestedProperties(schema: JsonObject, root: JsonObject): Map<string, JsonObject> | undefined {
  const resolved = resolve(schema, root);
  if (!isObject(resolved.properties)) return undefined;
  const out = new Map<string, JsonObject>();
  for (const [k, v] of Object.entries(resolved.properties)) if (isObject(v)) out.set(k, resolve(v, root));
  return out;
}

function analyse(schema: JsonObject): SchemaInfo {
  const root = resolve(schema, schema);
  const required = new Set(Array.isArray(root.required) ? root.required.filter((r) => typeof r === 'string') : []);
  const properties = new Map<string, PropertyInfo>();
  if (isObject(root.properties)) {
    for (const [name, sub] of Object.entries(root.properties)) {
      properties.set(name, { name, required: required.has(name), schema: isObject(sub) ? resolve(sub, schema) : {} });
    }
  }
  let req = 0;
  for (const p of properties.values()) if (p.required) req++;
  return {
    properties,
    required: req,
    optional: properties.size - req,
    orderedPairs: findOrderedPairs([...properties.keys()]),
    constraints: Math.max(1, countConstraints(schema, schema, 0, new Set())),
  };
}

/** Follows a local `$ref` (`#/$defs/x`, `#/definitions/x`); anything else is used as is. */
function resolve(schema: JsonObject, root: JsonObject, depth = 0): JsonObject {
  const ref = schema.$ref;
  if (typeof ref !== 'string' || !ref.startsWith('#') || depth > 8) return schema;
  let node: unknown = root;
  for (const raw of ref.slice(1).split('/').filter(Boolean)) {
    const seg = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    node = isObject(node) ? node[seg] : undefined;
  }
  return isObject(node) ? resolve({ ...node, ...withoutRef(schema) }, root, depth + 1) : schema;
}

function withoutRef(schema: JsonObject): JsonObject {
  const { $ref: _ignored, ...rest } = schema;
  return rest;
}

/** Keywords that each count as one checked constraint. */
const constraintKeywords = new Set([
  'type',
  'enum',
  'const',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'multipleOf',
  'minItems',
  'maxItems',
  'uniqueItems',
  'contains',
  'minProperties',
  'maxProperties',
  'propertyNames',
  'not',
]);

function countConstraints(node: unknown, root: JsonObject, depth: number, seen: Set<string>): number {
  if (!isObject(node) || depth > 8) return 0;
  let n = 0;
  if (typeof node.$ref === 'string') {
    if (seen.has(node.$ref)) return 0; // recursive schema: count it once
    seen.add(node.$ref);
    n += countConstraints(resolve({ $ref: node.$ref }, root), root, depth + 1, seen);
  }
  for (const key of Object.keys(node)) if (constraintKeywords.has(key)) n++;
  if (Array.isArray(node.required)) n += node.required.length;
  if (node.additionalProperties === false) n++;
  if (isObject(node.dependentRequired)) n += Object.keys(node.dependentRequired).length;
  const children: unknown[] = [];
  if (isObject(node.properties)) children.push(...Object.values(node.properties));
  if (isObject(node.additionalProperties)) children.push(node.additionalProperties);
  if (isObject(node.items)) children.push(node.items);
  for (const key of ['prefixItems', 'allOf', 'anyOf', 'oneOf']) {
    const list = node[key];
    if (Array.isArray(list)) children.push(...list);
  }
  for (const key of ['if', 'then', 'else']) if (isObject(node[key])) children.push(node[key]);
  for (const child of children) n += countConstraints(child, root, depth + 1, seen);
  return n;
}

const lowWords = ['min', 'minimum', 'start', 'from', 'begin', 'low', 'lower', 'since', 'after'];
const highWords = ['max', 'maximum', 'end', 'to', 'until', 'high', 'upper', 'before'];

/**
 * Pairs like `minPrice`/`maxPrice`, `min_price`/`max_price`, `priceMin`/`priceMax`,
 * `start`/`end`, `startDate`/`endDate`, `from`/`to`.
 */
export function findOrderedPairs(names: string[]): Array<[string, string]> {
  const byKey = new Map<string, { low?: string; high?: string }>();
  for (const name of names) {
    for (const [side, words] of [
      ['low', lowWords],
      ['high', highWords],
    ] as const) {
      const stem = stemOf(name, words);
      if (stem === undefined) continue;
      const entry = byKey.get(stem) ?? {};
      entry[side] ??= name;
      byKey.set(stem, entry);
    }
  }
  const pairs: Array<[string, string]> = [];
  for (const { low, high } of byKey.values()) if (low && high && low !== high) pairs.push([low, high]);
  return pairs;
}

/** The rest of a name once a leading or trailing bound word is removed, lower-cased. */
function stemOf(name: string, words: string[]): string | undefined {
  const parts = name
    .replace(/([a-z0-9])([A-Z])/g, '$1_$2')
    .toLowerCase()
    .split(/[_\-\s]+/)
    .filter(Boolean);
  if (parts.length === 0) return undefined;
  if (words.includes(parts[0])) return parts.slice(1).join('_');
  if (parts.length > 1 && words.includes(parts[parts.length - 1])) return parts.slice(0, -1).join('_');
  return undefined;
}

export function isObject(v: unknown): v is JsonObject {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
