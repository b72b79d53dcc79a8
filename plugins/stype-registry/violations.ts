/**
 * ajv errors as JSON-path violations (`$.a.b[0]`), the form the seed uses for validation errors.
 * A `required` error points at the missing property and an `additionalProperties` error at the
 * extra one, so that every path names the field a user must fix.
 */
import type { ErrorObject } from 'ajv';
import { describeSchemaError, pointerSegments, type Violation } from '../../runtime/index.ts';

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

export function toViolations(errors: ErrorObject[] | null | undefined, data: unknown, root = '$'): Violation[] {
  if (!errors) return [];
  const out: Violation[] = [];
  const seen = new Set<string>();
  for (const err of errors) {
    const segments = pointerSegments(err.instancePath);
    const extra = leafProperty(err);
    if (extra !== undefined) segments.push(extra);
    const path = root + renderPath(segments, data);
    const message = describeSchemaError(err);
    const key = `${path}\u0000${message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ path, message });
  }
  return out;
}

function leafProperty(err: ErrorObject): string | undefined {
  const params = err.params as Record<string, unknown>;
  if (err.keyword === 'required' || err.keyword === 'dependentRequired') return String(params.missingProperty);
  if (err.keyword === 'additionalProperties') return String(params.additionalProperty);
  if (err.keyword === 'unevaluatedProperties') return String(params.unevaluatedProperty);
  return undefined;
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

/** Dotted field name for config problems (`schema.$id`, `qom_profiles[0]`). */
export function fieldName(err: ErrorObject, data: unknown): string {
  const segments = pointerSegments(err.instancePath);
  const extra = leafProperty(err);
  if (extra !== undefined) segments.push(extra);
  const rendered = renderPath(segments, data);
  return rendered === '' ? '(file)' : rendered.replace(/^\./, '');
}

export function problemMessage(err: ErrorObject): string {
  return describeSchemaError(err);
}
