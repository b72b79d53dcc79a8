/**
 * The `record-type` resource: one entity type of an `entity-store` resource, with declared
 * fields. Stages that serve or change these records (record-api, elo, pairing) share it, so the
 * record's JSON shape, its validation and its OpenAPI schema are declared once.
 *
 *   resources:
 *     entities:
 *       type: record-type
 *       store: db
 *       entity_type: entity
 *       title: Entity
 *       fields:
 *         name: { type: string, required: true, max_length: 200 }
 *         rating: { type: number, read_only: true, default: 1500.0 }
 *       search: [name]
 *
 * A record is `{id, <visible fields in declaration order>, <timestamps>}`: the store's integer
 * id, the data fields flat (a field absent from stored data shows as null), no envelope.
 */
import { defineResource, type Entity, type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';
import type { EntityStoreResource } from '../entity-store/api.ts';
import type { RecordType } from './api.ts';
import { type FieldSpec, fieldSchema, validateBody, visibleFields } from './fields.ts';
import { validationError } from './issues.ts';

const jsonType = { string: 'string', integer: 'integer', number: 'number', boolean: 'boolean', array: 'array' };

/** JSON Schema of one field (OpenAPI 3.1 is JSON Schema 2020-12). */
function fieldJsonSchema(spec: FieldSpec): Record<string, unknown> {
  const s: Record<string, unknown> = { type: spec.nullable ? [jsonType[spec.type], 'null'] : jsonType[spec.type] };
  if (spec.description) s.description = spec.description;
  if (spec.min_length !== undefined) s.minLength = spec.min_length;
  if (spec.max_length !== undefined) s.maxLength = spec.max_length;
  if (spec.minimum !== undefined) s.minimum = spec.minimum;
  if (spec.maximum !== undefined) s.maximum = spec.maximum;
  if (spec.type === 'array') {
    s.items = fieldJsonSchema({ ...(spec.items ?? { type: 'string' }) });
    if (spec.min_items !== undefined) s.minItems = spec.min_items;
    if (spec.max_items !== undefined) s.maxItems = spec.max_items;
  }
  if (spec.default !== undefined) s.default = spec.default;
  return s;
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['store', 'entity_type', 'fields'],
  properties: {
    store: { type: 'string', 'x-ref': 'resource', description: 'An entity-store resource.' },
    entity_type: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$', description: "The store's type name." },
    title: { type: 'string', minLength: 1, description: 'Display name, e.g. Entity (default: the type name).' },
    plural_title: {
      type: 'string',
      minLength: 1,
      description: 'Plural display name, e.g. People (default: English rules on title: Entity → Entities).',
    },
    fields: {
      type: 'object',
      description: 'Field name → declaration, in the order records show them.',
      propertyNames: { pattern: '^[a-z][a-z0-9_]{0,63}$', not: { enum: ['id', 'created_at', 'updated_at'] } },
      additionalProperties: fieldSchema,
    },
    search: {
      type: 'array',
      items: { type: 'string' },
      default: [],
      description: 'String fields `?search=` matches (case-insensitive substring).',
    },
    timestamps: {
      type: 'array',
      items: { enum: ['created_at', 'updated_at'] },
      uniqueItems: true,
      default: [],
      description: 'Store timestamps shown in each record (ISO 8601).',
    },
  },
} as const satisfies JsonSchema;
type RecordTypeOptions = FromSchema<typeof optionsSchema>;

export default defineResource<RecordTypeOptions, RecordType>({
  type: 'record-type',
  description:
    'An entity type of an entity-store with declared fields: the JSON shape, validation and schema of its records',
  options: optionsSchema,
  create(options, env) {
    const title = options.title ?? options.entity_type;
    const fields = options.fields;
    const search = options.search;
    for (const f of search) {
      if (fields[f]?.type !== 'string') throw new Error(`search field "${f}" is not a declared string field`);
    }
    const db = env.resource<EntityStoreResource>(options.store);
    const shown = visibleFields(fields);
    const timestamps = options.timestamps;

    const schemas = () => {
      const record: Record<string, unknown> = {
        type: 'object',
        title,
        properties: {
          id: { type: 'integer' },
          ...Object.fromEntries(shown.map((f) => [f, fieldJsonSchema(fields[f]!)])),
          ...Object.fromEntries(timestamps.map((t) => [t, { type: 'string', format: 'date-time' }])),
        },
        required: ['id', ...shown, ...timestamps],
      };
      const writable = Object.entries(fields).filter(([, s]) => !s.read_only);
      const body = (partial: boolean) => ({
        type: 'object',
        title: `${title}${partial ? 'Update' : 'Create'}`,
        additionalProperties: false,
        properties: Object.fromEntries(writable.map(([f, s]) => [f, fieldJsonSchema(s)])),
        ...(partial ? {} : { required: writable.filter(([, s]) => s.required).map(([f]) => f) }),
      });
      return { record, create: body(false), update: body(true) };
    };

    const value: RecordType = {
      title,
      pluralTitle: options.plural_title ?? pluralOf(title),
      entityType: options.entity_type,
      fields,
      search,
      timestamps,
      store: () => db.store,
      project(entity: Entity) {
        const out: Record<string, unknown> = { id: entity.id };
        for (const f of shown) out[f] = entity.data[f] ?? null;
        for (const t of timestamps) out[t] = entity[t];
        return out;
      },
      parse(body, mode) {
        const { value: accepted, issues } = validateBody(fields, body, mode);
        if (issues.length > 0) throw validationError(issues);
        return accepted;
      },
      schemas,
      notFound: (id) => new GatewayError('not_found', `${title} ${id} not found`, { details: { type: title, id } }),
    };
    return { value, describe: () => ({ entity_type: options.entity_type, fields: Object.keys(fields) }) };
  },
});

/**
 * The regular English plural (Entity → Entities, Match → Matches, Key → Keys); irregular ones are
 * the `plural_title` option's job.
 */
export function pluralOf(word: string): string {
  if (/[^aeiou]y$/i.test(word)) return `${word.slice(0, -1)}ies`;
  if (/(s|x|z|ch|sh)$/i.test(word)) return `${word}es`;
  return `${word}s`;
}
