/**
 * record-api: create, list, get, update (partial) and delete records of a `record-type`
 * resource, in the shapes a FastAPI CRUD router gives: the record itself as the body (200), a
 * JSON array for lists, 404 for a missing id, 422 with every validation issue.
 *
 *   - record-api: { records: entities, op: list, max_limit: 1000 }
 *   - record-api: { records: comparisons, op: list, filters: { entity_id: [entity1_id, entity2_id] } }
 *
 * List parameters: `skip` (≥ 0, default 0), `limit` (1..max_limit, default default_limit),
 * `search` (substring of the record type's search fields, when it has any), and each declared
 * filter (`?entity_id=3`: records whose entity1_id or entity2_id is 3). Order: by id, oldest
 * first, unless `order` says otherwise. An update reads, merges and writes in one transaction,
 * the write checked against the version read (so it never overwrites a concurrent change; it
 * is retried instead).
 */
import { definePlugin, type Filter, type FromSchema, type JsonSchema, readJson, respond } from '../../runtime/index.ts';
import {
  describeStage,
  errorResponse,
  jsonResponse,
  ref,
  validationResponse,
  validationSchemas,
} from '../openapi/api.ts';
import { type RecordType, writeQueue } from './api.ts';
import { type ValidationIssue, validationError } from './issues.ts';
import { integerParam, stringParam } from './params.ts';

const PARAM = '^[a-z][a-z0-9_]{0,63}$';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['records', 'op'],
  properties: {
    records: { type: 'string', 'x-ref': 'resource', description: 'A record-type resource.' },
    op: { enum: ['create', 'list', 'get', 'update', 'delete'] },
    id_param: { type: 'string', pattern: PARAM, default: 'id', description: 'Route parameter holding the id.' },
    default_limit: { type: 'integer', minimum: 1, default: 100 },
    max_limit: { type: 'integer', minimum: 1, default: 1000, description: 'Largest `limit` accepted (422 above).' },
    search_max_length: { type: 'integer', minimum: 1, default: 200 },
    filters: {
      type: 'object',
      default: {},
      propertyNames: { pattern: PARAM },
      additionalProperties: { type: 'array', minItems: 1, items: { type: 'string', pattern: PARAM } },
      description:
        'Integer query parameter → fields it matches (any of them), e.g. {entity_id: [entity1_id, entity2_id]}.',
    },
    order: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['field'],
        properties: { field: { type: 'string' }, direction: { enum: ['asc', 'desc'] } },
      },
      default: [{ field: 'id', direction: 'asc' }],
    },
    retries: { type: 'integer', minimum: 0, default: 20, description: 'update: retries after a version conflict.' },
  },
} as const satisfies JsonSchema;
type RecordApiOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<RecordApiOptions>({
  name: 'record-api',
  description: 'CRUD over a record-type: create, list (skip/limit/search/filters), get, partial update, delete.',
  options: optionsSchema,
  create(options, env) {
    const records = env.resource<RecordType>(options.records);
    const idParam = options.id_param;
    const maxLimit = options.max_limit;
    const defaultLimit = Math.min(options.default_limit, maxLimit);
    const filters = Object.entries(options.filters);
    const order = options.order;
    const type = records.entityType;

    const readId = (params: Record<string, string>): number => {
      const issues: ValidationIssue[] = [];
      const id = integerParam(params[idParam], ['path', idParam], {}, issues);
      if (issues.length > 0 || id === undefined) throw validationError(issues);
      return id;
    };

    const list = async (query: Record<string, string | string[] | undefined>, requestId: string) => {
      const issues: ValidationIssue[] = [];
      const skip = integerParam(query.skip, ['query', 'skip'], { default: 0, minimum: 0 }, issues)!;
      const limit = integerParam(
        query.limit,
        ['query', 'limit'],
        { default: defaultLimit, minimum: 1, maximum: maxLimit },
        issues,
      )!;
      const conditions: Filter[] = [];
      if (records.search.length > 0) {
        const text = stringParam(query.search, ['query', 'search'], options.search_max_length, issues);
        if (text !== undefined)
          conditions.push({ any: records.search.map((field) => ({ field, op: 'contains' as const, value: text })) });
      }
      for (const [param, fields] of filters) {
        const value = integerParam(query[param], ['query', param], {}, issues);
        if (value !== undefined) conditions.push({ any: fields.map((field) => ({ field, op: 'eq' as const, value })) });
      }
      if (issues.length > 0) throw validationError(issues);
      const result = await records.store().query(type, {
        filter: conditions.length === 0 ? undefined : { all: conditions },
        order,
        offset: skip,
        limit,
        requestId,
      });
      return result.items.map((e) => records.project(e));
    };

    return async (ctx) => {
      const requestId = ctx.state.requestId;
      switch (options.op) {
        case 'create': {
          const data = records.parse(await readJson(ctx), 'create');
          const store = records.store();
          respond(ctx, records.project(await writeQueue(store)(() => store.create(type, data, { requestId }))));
          return;
        }
        case 'list':
          respond(ctx, await list(ctx.query, requestId));
          return;
        case 'get': {
          const id = readId(ctx.params);
          const found = await records.store().get(type, id, { requestId });
          if (!found) throw records.notFound(id);
          respond(ctx, records.project(found));
          return;
        }
        case 'update': {
          const id = readId(ctx.params);
          const changes = records.parse(await readJson(ctx), 'update');
          const store = records.store();
          const updated = await writeQueue(store)(() =>
            store.transaction(
              async (tx) => {
                const current = await tx.get(type, id, { requestId });
                if (!current) throw records.notFound(id);
                if (Object.keys(changes).length === 0) return current;
                return (await tx.update(
                  type,
                  id,
                  { ...current.data, ...changes },
                  { ifVersion: current.version, requestId },
                ))!;
              },
              { retries: options.retries },
            ),
          );
          respond(ctx, records.project(updated));
          return;
        }
        case 'delete': {
          const id = readId(ctx.params);
          const store = records.store();
          const gone = await writeQueue(store)(() =>
            store.transaction(
              async (tx) => {
                const current = await tx.get(type, id, { requestId });
                if (!current) throw records.notFound(id);
                await tx.delete(type, id, { ifVersion: current.version, requestId });
                return current;
              },
              { retries: options.retries },
            ),
          );
          respond(ctx, records.project(gone));
          return;
        }
      }
    };
  },
});

/** The OpenAPI operation of each op, from the record type's declared fields. */
describeStage('record-api', (raw, ctx) => {
  const o = raw as RecordApiOptions;
  const records = ctx.resource<RecordType>(o.records);
  const name = records.title.replace(/[^A-Za-z0-9]/g, '');
  const s = records.schemas();
  const schemas = { ...validationSchemas, [name]: s.record, [`${name}Create`]: s.create, [`${name}Update`]: s.update };
  const idParam = { name: o.id_param, in: 'path', required: true, schema: { type: 'integer' } };
  const body = (schema: string) => ({ required: true, content: { 'application/json': { schema: ref(schema) } } });
  const one = jsonResponse(`The ${records.title.toLowerCase()}`, ref(name));
  const missing = errorResponse(`No ${records.title.toLowerCase()} with this id`);
  const plural = records.pluralTitle.replace(/[^A-Za-z0-9]/g, '');
  const tags = [plural.toLowerCase()];
  switch (o.op) {
    case 'create':
      return {
        schemas,
        operation: {
          tags,
          summary: `Create ${name}`,
          requestBody: body(`${name}Create`),
          responses: { 200: one, 422: validationResponse },
        },
      };
    case 'get':
      return {
        schemas,
        operation: {
          tags,
          summary: `Get ${name}`,
          parameters: [idParam],
          responses: { 200: one, 404: missing, 422: validationResponse },
        },
      };
    case 'update':
      return {
        schemas,
        operation: {
          tags,
          summary: `Update ${name}`,
          description: 'Partial update: only the fields given change.',
          parameters: [idParam],
          requestBody: body(`${name}Update`),
          responses: { 200: one, 404: missing, 422: validationResponse },
        },
      };
    case 'delete':
      return {
        schemas,
        operation: {
          tags,
          summary: `Delete ${name}`,
          description: 'Answers the deleted record.',
          parameters: [idParam],
          responses: { 200: one, 404: missing, 422: validationResponse },
        },
      };
    case 'list': {
      const max = o.max_limit;
      const parameters: unknown[] = [
        { name: 'skip', in: 'query', schema: { type: 'integer', minimum: 0, default: 0 } },
        {
          name: 'limit',
          in: 'query',
          schema: { type: 'integer', minimum: 1, maximum: max, default: Math.min(o.default_limit, max) },
        },
      ];
      if (records.search.length > 0)
        parameters.push({
          name: 'search',
          in: 'query',
          description: `Case-insensitive substring of ${records.search.join(' or ')}`,
          schema: { type: ['string', 'null'], maxLength: o.search_max_length },
        });
      for (const [param, fields] of Object.entries(o.filters))
        parameters.push({
          name: param,
          in: 'query',
          description: `Records whose ${fields.join(' or ')} is this id`,
          schema: { type: ['integer', 'null'] },
        });
      return {
        schemas,
        operation: {
          tags,
          summary: `List ${plural}`,
          parameters,
          responses: { 200: jsonResponse(plural, { type: 'array', items: ref(name) }), 422: validationResponse },
        },
      };
    }
  }
});
