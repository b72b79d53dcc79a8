/**
 * What a JSON Schema (ajv) error says, in words a client reads next to the path it names, and the
 * path itself: the segments of its JSON Pointer (RFC 6901), unescaped. One place for every stage
 * that reports schema violations (request validation, the MCP protocol check, config files).
 */
import type { ErrorObject } from 'ajv';

/** One schema violation, as stages report them to clients. */
export interface Violation {
  /** JSON path relative to the request, e.g. `$.arguments.message`. */
  path: string;
  message: string;
}

/** A short phrase for the error, to follow the field it is about ("is required", "must be string"). */
export function describeSchemaError(err: ErrorObject): string {
  const params = err.params as Record<string, unknown>;
  switch (err.keyword) {
    case 'required':
    case 'dependentRequired':
      return 'is required';
    case 'additionalProperties':
    case 'unevaluatedProperties':
      return 'is not allowed';
    case 'type':
      return `must be ${[params.type].flat().join(' or ')}`;
    case 'const':
      return `must be ${JSON.stringify(params.allowedValue)}`;
    case 'enum':
      return `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    default:
      return err.message ?? `fails ${err.keyword}`;
  }
}

/** The segments of a JSON Pointer (`/a/b~1c` → `['a', 'b/c']`; `''` → `[]`). */
export function pointerSegments(pointer: string): string[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * ajv errors as JSON-path violations (`$.a.b[0]`), the form the seed uses for validation errors.
 * A `required` error points at the missing property and an `additionalProperties` error at the
 * extra one, so that every path names the field a user must fix. At most `limit` errors are read.
 */
export function toViolations(
  errors: ErrorObject[] | null | undefined,
  data: unknown,
  root = '$',
  limit = Number.POSITIVE_INFINITY,
): Violation[] {
  if (!errors) return [];
  const out: Violation[] = [];
  const seen = new Set<string>();
  for (const err of errors.length > limit ? errors.slice(0, limit) : errors) {
    const path = root + renderPath(errorSegments(err), data);
    const message = describeSchemaError(err);
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path, message });
  }
  return out;
}

/** Dotted field name for config problems (`schema.$id`, `qom_profiles[0]`). */
export function schemaFieldName(err: ErrorObject, data: unknown): string {
  const rendered = renderPath(errorSegments(err), data);
  return rendered === '' ? '(file)' : rendered.replace(/^\./, '');
}

/** The error's path, plus the property it is about when the error is about a missing or extra one. */
function errorSegments(err: ErrorObject): string[] {
  const segments = pointerSegments(err.instancePath);
  const params = err.params as Record<string, unknown>;
  const leaf =
    err.keyword === 'required' || err.keyword === 'dependentRequired'
      ? params.missingProperty
      : err.keyword === 'additionalProperties'
        ? params.additionalProperty
        : err.keyword === 'unevaluatedProperties'
          ? params.unevaluatedProperty
          : undefined;
  if (leaf !== undefined) segments.push(String(leaf));
  return segments;
}

/** Walks the data alongside the path so that array indexes render as `[n]` and keys as `.k`. */
function renderPath(segments: string[], data: unknown): string {
  let out = '';
  let node: unknown = data;
  for (const seg of segments) {
    if (Array.isArray(node) && /^\d+$/.test(seg)) {
      out += `[${seg}]`;
      node = node[Number(seg)];
      continue;
    }
    out += identifier.test(seg) ? `.${seg}` : `[${JSON.stringify(seg)}]`;
    node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[seg] : undefined;
  }
  return out;
}
