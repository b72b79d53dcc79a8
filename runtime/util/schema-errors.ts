/**
 * What a JSON Schema (ajv) error says, in words a client reads next to the path it names, and the
 * path itself: the segments of its JSON Pointer (RFC 6901), unescaped. One place for every stage
 * that reports schema violations (request validation, the MCP protocol check, config files).
 */
import type { ErrorObject } from 'ajv';

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
