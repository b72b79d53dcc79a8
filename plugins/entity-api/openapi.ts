/**
 * The OpenAPI 3.1 description of the entity API, built from the stage's settings (base path,
 * paging limits, If-Match policy, the store's budgets) so that it always says what the running
 * service does.
 */

export interface OpenApiSettings {
  title: string;
  version: string;
  basePath: string;
  defaultLimit: number;
  maxLimit: number;
  requireIfMatch: boolean;
  maxEntities: number;
  maxDepth: number;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: unknown) => ({ 'application/json': { schema } });
const error = (description: string) => ({ description, content: json(ref('Error')) });
const param = (name: string) => ({ $ref: `#/components/parameters/${name}` });

export function openApiDocument(s: OpenApiSettings): Record<string, unknown> {
  const ifMatch = {
    name: 'If-Match',
    in: 'header',
    required: s.requireIfMatch,
    description: s.requireIfMatch
      ? 'Required: the ETag (version) of the entity you read; 412 when it moved on, 428 when missing.'
      : 'The ETag (version) of the entity you read; 412 when it moved on. Without it the last write wins.',
    schema: { type: 'string', examples: ['"3"'] },
  };
  const etagHeader = { ETag: { description: 'The entity version, quoted', schema: { type: 'string' } } };
  const writeErrors = {
    '400': error('Bad input: the field or parameter is named in details'),
    '403': error('read_only: the store refuses writes (a replica)'),
    '404': error('No such entity'),
    '412': error('precondition_failed: If-Match does not list the current version (in details.current_version)'),
    '413': error('Body larger than the service allows'),
    '415': error('Content-Type is not JSON'),
    ...(s.requireIfMatch ? { '428': error('precondition_required: If-Match is missing') } : {}),
    '503': error('Storage unavailable'),
  };
  return {
    openapi: '3.1.0',
    info: {
      title: s.title,
      version: s.version,
      description:
        'Typed JSON entities with a version each. Versions are ETags: send If-Match on writes for ' +
        `optimistic concurrency. Queries are bounded: at most ${s.maxEntities} entities per query ` +
        `(expanded ones included) and relations expanded ${s.maxDepth} levels deep.`,
    },
    paths: {
      [`${s.basePath}/{type}`]: {
        parameters: [param('type')],
        get: {
          operationId: 'listEntities',
          summary: 'List entities of a type, filtered, sorted and paged',
          parameters: ['limit', 'offset', 'where', 'filter', 'order', 'expand', 'count'].map(param),
          responses: {
            '200': { description: 'A page of entities', content: json(ref('EntityList')) },
            '400': error('Bad parameter (named in details.param) or a query budget exceeded'),
            '503': error('Storage unavailable'),
          },
        },
        post: {
          operationId: 'createEntity',
          summary: 'Create an entity; the body is its data',
          parameters: [param('key')],
          requestBody: { required: true, content: json(ref('EntityData')) },
          responses: {
            '201': {
              description: 'Created',
              headers: { ...etagHeader, Location: { description: 'URL of the entity', schema: { type: 'string' } } },
              content: json(ref('Entity')),
            },
            '409': error('duplicate_key: the type already has an entity with this key'),
            ...writeErrors,
          },
        },
      },
      [`${s.basePath}/{type}/{id}`]: {
        parameters: [param('type'), param('id')],
        get: {
          operationId: 'getEntity',
          summary: 'Read an entity',
          parameters: [
            param('expand'),
            { name: 'If-None-Match', in: 'header', schema: { type: 'string' }, description: '304 when current' },
          ],
          responses: {
            '200': { description: 'The entity', headers: etagHeader, content: json(ref('Entity')) },
            '304': { description: 'Not modified: If-None-Match lists the current version' },
            '400': error('Bad parameter or a query budget exceeded'),
            '404': error('No such entity'),
            '503': error('Storage unavailable'),
          },
        },
        put: {
          operationId: 'replaceEntity',
          summary: "Replace an entity's data",
          parameters: [ifMatch],
          requestBody: { required: true, content: json(ref('EntityData')) },
          responses: {
            '200': { description: 'Replaced', headers: etagHeader, content: json(ref('Entity')) },
            ...writeErrors,
          },
        },
        patch: {
          operationId: 'patchEntity',
          summary: "Merge into an entity's data (JSON Merge Patch, RFC 7396: null removes a field)",
          parameters: [ifMatch],
          requestBody: {
            required: true,
            content: { 'application/merge-patch+json': { schema: ref('EntityData') }, ...json(ref('EntityData')) },
          },
          responses: {
            '200': { description: 'Merged', headers: etagHeader, content: json(ref('Entity')) },
            ...writeErrors,
          },
        },
        delete: {
          operationId: 'deleteEntity',
          summary: 'Delete an entity',
          parameters: [ifMatch],
          responses: { '204': { description: 'Deleted' }, ...writeErrors },
        },
      },
    },
    components: {
      parameters: {
        type: {
          name: 'type',
          in: 'path',
          required: true,
          schema: { type: 'string', pattern: '^[a-z][a-z0-9_]{0,63}$' },
        },
        id: { name: 'id', in: 'path', required: true, schema: { type: 'integer', minimum: 1 } },
        limit: {
          name: 'limit',
          in: 'query',
          schema: { type: 'integer', minimum: 1, maximum: s.maxLimit, default: s.defaultLimit },
        },
        offset: { name: 'offset', in: 'query', schema: { type: 'integer', minimum: 0, default: 0 } },
        where: {
          name: 'where',
          in: 'query',
          style: 'deepObject',
          explode: true,
          description:
            'Field conditions, all of which must hold: `where[field]=value` (equals) or `where[field][op]=value` ' +
            'with op one of eq, ne, lt, lte, gt, gte, in (comma-separated values), contains (case-insensitive ' +
            'substring). Values: numbers, true, false and null are read as such; quote a value ("42") to ' +
            'compare as a string. Dotted fields reach into nested objects.',
          schema: { type: 'object', additionalProperties: true },
        },
        filter: {
          name: 'filter',
          in: 'query',
          description: 'A filter as JSON: {field, op, value}, {all: [filters]} or {any: [filters]}.',
          content: { 'application/json': { schema: ref('Filter') } },
        },
        order: {
          name: 'order',
          in: 'query',
          description: 'Sort fields, comma-separated, `-` for descending, e.g. `-rating,name`. Ties break on id.',
          schema: { type: 'string' },
        },
        expand: {
          name: 'expand',
          in: 'query',
          description: `Reference fields to replace by the entities they name, comma-separated, dotted for nested ones (at most ${s.maxDepth} levels).`,
          schema: { type: 'string' },
        },
        count: {
          name: 'count',
          in: 'query',
          description: 'Also return `total`, the number of matching entities.',
          schema: { type: 'boolean', default: false },
        },
        key: {
          name: 'key',
          in: 'query',
          description: 'An optional caller-chosen key, unique per type.',
          schema: { type: 'string', minLength: 1, maxLength: 200 },
        },
      },
      schemas: {
        EntityData: {
          type: 'object',
          description:
            "The caller's JSON object. Top-level field names match [a-z][a-z0-9_]*; id, key, version, created_at and updated_at are reserved.",
          propertyNames: { pattern: '^[a-z][a-z0-9_]{0,63}$' },
        },
        Entity: {
          type: 'object',
          required: ['id', 'type', 'key', 'version', 'created_at', 'updated_at', 'data'],
          properties: {
            id: { type: 'integer', minimum: 1 },
            type: { type: 'string' },
            key: { type: ['string', 'null'] },
            version: { type: 'integer', minimum: 1 },
            created_at: { type: 'string', format: 'date-time' },
            updated_at: { type: 'string', format: 'date-time' },
            data: ref('EntityData'),
          },
        },
        EntityList: {
          type: 'object',
          required: ['items', 'limit', 'offset'],
          properties: {
            items: { type: 'array', items: ref('Entity') },
            limit: { type: 'integer' },
            offset: { type: 'integer' },
            total: { type: 'integer', description: 'With count=true' },
          },
        },
        Filter: {
          oneOf: [
            {
              type: 'object',
              required: ['field', 'value'],
              properties: {
                field: { type: 'string' },
                op: { enum: ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'contains'], default: 'eq' },
                value: {},
              },
              additionalProperties: false,
            },
            {
              type: 'object',
              required: ['all'],
              properties: { all: { type: 'array', items: ref('Filter') } },
              additionalProperties: false,
            },
            {
              type: 'object',
              required: ['any'],
              properties: { any: { type: 'array', items: ref('Filter') } },
              additionalProperties: false,
            },
          ],
        },
        Error: {
          type: 'object',
          required: ['error', 'message'],
          properties: {
            error: { type: 'string', description: 'A stable code, e.g. invalid_parameter, precondition_failed' },
            message: { type: 'string' },
            details: { type: 'object' },
          },
        },
      },
    },
  };
}
