/**
 * A record type's declared fields, and the strict validation of a create or partial update
 * body against them. Strict means what a client would expect from a typed API: `"5"` is not an
 * integer, `1.5` is not an integer, `true` is not a number, unknown and read-only fields are
 * refused (`extra_forbidden`), and every problem is reported, each with its location.
 */
import type { FromSchema, JsonSchema } from '../../runtime/index.ts';
import { issue, type ValidationIssue } from './issues.ts';

const scalar = {
  type: { enum: ['string', 'integer', 'number', 'boolean'] },
  min_length: { type: 'integer', minimum: 0 },
  max_length: { type: 'integer', minimum: 0 },
  minimum: { type: 'number' },
  maximum: { type: 'number' },
} as const;

/** The schema of one field's declaration (the `fields:` of a record-type): it types `FieldSpec` too. */
export const fieldSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['type'],
  properties: {
    ...scalar,
    type: { enum: ['string', 'integer', 'number', 'boolean', 'array'] },
    description: { type: 'string' },
    required: { type: 'boolean', description: 'Must be given on create.' },
    nullable: { type: 'boolean', description: 'null is a valid value (the value on create when not given).' },
    default: { description: 'Value on create when not given.' },
    read_only: { type: 'boolean', description: 'Set by the service, refused in bodies (e.g. a rating).' },
    hidden: { type: 'boolean', description: 'Stored but never shown (e.g. a counter a stage keeps).' },
    items: { type: 'object', additionalProperties: false, required: ['type'], properties: scalar },
    min_items: { type: 'integer', minimum: 0 },
    max_items: { type: 'integer', minimum: 0 },
  },
} as const satisfies JsonSchema;

/**
 * One field's declaration: `type`, bounds (`min_length`/`max_length`, `minimum`/`maximum`,
 * `array`: `items`, `min_items`/`max_items`), `required` on create, `nullable`, a `default` on
 * create (a fresh copy each time), `read_only` (set by the service, refused in bodies), `hidden`
 * (stored, never shown).
 */
export type FieldSpec = FromSchema<typeof fieldSchema>;
/** An `array` field's items. */
export type ItemSpec = NonNullable<FieldSpec['items']>;
export type FieldType = FieldSpec['type'];

export type FieldSpecs = Record<string, FieldSpec>;

const typeIssue: Record<FieldType, [string, string]> = {
  string: ['string_type', 'Input should be a valid string'],
  integer: ['int_type', 'Input should be a valid integer'],
  number: ['float_type', 'Input should be a valid number'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  array: ['list_type', 'Input should be a valid list'],
};

function checkScalar(spec: ItemSpec, value: unknown, loc: Array<string | number>, out: ValidationIssue[]): void {
  const ok =
    spec.type === 'string'
      ? typeof value === 'string'
      : spec.type === 'integer'
        ? Number.isSafeInteger(value)
        : spec.type === 'number'
          ? typeof value === 'number' && Number.isFinite(value)
          : typeof value === 'boolean';
  if (!ok) {
    const [type, msg] = typeIssue[spec.type];
    out.push(issue(type, loc, msg, value));
    return;
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (spec.min_length !== undefined && length < spec.min_length)
      out.push(
        issue('string_too_short', loc, `String should have at least ${plural(spec.min_length, 'character')}`, value, {
          min_length: spec.min_length,
        }),
      );
    if (spec.max_length !== undefined && length > spec.max_length)
      out.push(
        issue('string_too_long', loc, `String should have at most ${plural(spec.max_length, 'character')}`, value, {
          max_length: spec.max_length,
        }),
      );
  }
  if (typeof value === 'number') {
    if (spec.minimum !== undefined && value < spec.minimum)
      out.push(
        issue('greater_than_equal', loc, `Input should be greater than or equal to ${spec.minimum}`, value, {
          ge: spec.minimum,
        }),
      );
    if (spec.maximum !== undefined && value > spec.maximum)
      out.push(
        issue('less_than_equal', loc, `Input should be less than or equal to ${spec.maximum}`, value, {
          le: spec.maximum,
        }),
      );
  }
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function checkField(spec: FieldSpec, value: unknown, loc: Array<string | number>, out: ValidationIssue[]): void {
  if (value === null) {
    if (!spec.nullable) out.push(issue(typeIssue[spec.type][0], loc, typeIssue[spec.type][1], value));
    return;
  }
  if (spec.type !== 'array') {
    checkScalar(spec as ItemSpec, value, loc, out);
    return;
  }
  if (!Array.isArray(value)) {
    out.push(issue('list_type', loc, 'Input should be a valid list', value));
    return;
  }
  if (spec.max_items !== undefined && value.length > spec.max_items) {
    out.push(
      issue(
        'too_long',
        loc,
        `List should have at most ${plural(spec.max_items, 'item')} after validation, not ${value.length}`,
        undefined,
        { max_length: spec.max_items, actual_length: value.length },
      ),
    );
    return; // do not report every item of a huge list
  }
  if (spec.min_items !== undefined && value.length < spec.min_items)
    out.push(
      issue(
        'too_short',
        loc,
        `List should have at least ${plural(spec.min_items, 'item')} after validation, not ${value.length}`,
        undefined,
        { min_length: spec.min_items, actual_length: value.length },
      ),
    );
  const items = spec.items ?? { type: 'string' };
  for (const [i, v] of value.entries()) checkScalar(items, v, [...loc, i], out);
}

/**
 * Checks a body against the writable fields. `create` fills defaults and requires the
 * required fields; `update` takes only what is given (a partial update). Returns the accepted
 * values (only declared fields) and the issues found.
 */
export function validateBody(
  fields: FieldSpecs,
  body: unknown,
  mode: 'create' | 'update',
): { value: Record<string, unknown>; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = [];
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    issues.push(
      issue(
        'model_attributes_type',
        ['body'],
        'Input should be a valid dictionary or object to extract fields from',
        body,
      ),
    );
    return { value: {}, issues };
  }
  const input = body as Record<string, unknown>;
  const value: Record<string, unknown> = {};
  for (const key of Object.keys(input)) {
    const spec = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (!spec || spec.read_only)
      issues.push(issue('extra_forbidden', ['body', key], 'Extra inputs are not permitted', input[key]));
  }
  for (const [name, spec] of Object.entries(fields)) {
    if (spec.read_only) {
      if (mode === 'create' && spec.default !== undefined) value[name] = structuredClone(spec.default);
      continue;
    }
    if (!Object.hasOwn(input, name)) {
      if (mode === 'create' && spec.required) issues.push(issue('missing', ['body', name], 'Field required'));
      else if (mode === 'create' && spec.default !== undefined) value[name] = structuredClone(spec.default);
      else if (mode === 'create' && spec.nullable) value[name] = null;
      continue;
    }
    const before = issues.length;
    checkField(spec, input[name], ['body', name], issues);
    if (issues.length === before) value[name] = input[name];
  }
  return { value, issues };
}

/** The fields a client sees, in declaration order (hidden ones left out, absent ones null). */
export function visibleFields(fields: FieldSpecs): string[] {
  return Object.entries(fields)
    .filter(([, s]) => !s.hidden)
    .map(([name]) => name);
}
