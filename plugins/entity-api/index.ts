/**
 * entity-api: the entities of an `entity-store` resource over HTTP (terminal stage). The routes
 * say where; the stage serves by path parameters and method:
 *
 *   routes:
 *     - match: { method: [GET, POST], path: /v1/entities/:type }                 # list, create
 *       pipeline: [{ entity-api: { store: store } }]
 *     - match: { method: [GET, PUT, PATCH, DELETE], path: /v1/entities/:type/:id } # read, replace, merge, delete
 *       pipeline: [{ entity-api: { store: store } }]
 *     - match: { method: GET, path: /openapi.json }
 *       pipeline: [{ entity-api: { store: store, op: openapi, base_path: /v1/entities } }]
 *
 * Versions are ETags (`"3"`); `If-Match` on a write makes it conditional (412 with the current
 * version otherwise), `require_if_match` makes it mandatory (428). Every refusal is a 4xx naming
 * the parameter, field or header at fault, decided before anything is written. See
 * docs/datastore.md for the query syntax.
 */
import {
  definePlugin,
  type Entity,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  readJsonObject,
  respond,
  VersionConflictError,
} from '../../runtime/index.ts';
import type { EntityStoreResource } from '../entity-store/api.ts';
import { mergePatch } from './merge-patch.ts';
import { openApiDocument } from './openapi.ts';
import {
  checkFields,
  createKey,
  entityId,
  entityType,
  expandPaths,
  listRequest,
  queryParams,
  requireJsonType,
} from './params.ts';
import { etag, parseEtags, preconditionFailed, preconditionRequired } from './preconditions.ts';

// GatewayError's static hasInstance narrows only to GatewayError: say what the check means.
const isConflict = (err: unknown): err is VersionConflictError => err instanceof VersionConflictError;

/** A PATCH without If-Match re-reads and retries this often when another write slips in between. */
const PATCH_ATTEMPTS = 3;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['store'],
  properties: {
    store: {
      type: 'string',
      minLength: 1,
      'x-ref': 'resource',
      description: 'An entity-store resource declared under resources:',
    },
    op: {
      enum: ['entities', 'openapi'],
      default: 'entities',
      description: 'entities: serve /:type and /:type/:id routes; openapi: answer the OpenAPI 3.1 document',
    },
    require_if_match: {
      type: 'boolean',
      default: false,
      description: 'Refuse PUT, PATCH and DELETE without If-Match (428) instead of letting the last write win',
    },
    default_limit: { type: 'integer', minimum: 1, default: 20, description: 'Page size when limit is not given' },
    max_limit: { type: 'integer', minimum: 1, default: 100, description: 'Largest limit accepted (400 above)' },
    base_path: {
      type: 'string',
      pattern: '^(/[A-Za-z0-9._~-]+)*$',
      default: '/v1/entities',
      description: 'openapi: the path the /:type and /:type/:id routes are under',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'entity-api',
  description: 'HTTP API over an entity-store: create, read, replace, merge, delete, list; or its OpenAPI document',
  options: optionsSchema,
  create(options, env) {
    const resource = env.resource<EntityStoreResource>(options.store);
    if (typeof resource?.store?.query !== 'function')
      throw new Error(`resource "${options.store}" is not an entity-store`);
    const store = resource.store;
    const requireIfMatch = options.require_if_match;
    const maxLimit = options.max_limit;
    // The default page never exceeds the store's budget: a plain list must not be refused.
    const paging = {
      defaultLimit: Math.min(options.default_limit, maxLimit, store.limits.maxEntities),
      maxLimit,
    };

    if (options.op === 'openapi') {
      const document = openApiDocument({
        title: `${env.service.name} entity API`,
        version: env.service.version,
        basePath: options.base_path,
        defaultLimit: paging.defaultLimit,
        maxLimit,
        requireIfMatch,
        maxEntities: store.limits.maxEntities,
        maxDepth: store.limits.maxDepth,
      });
      return async (ctx) => {
        queryParams(ctx, []);
        respond(ctx, document);
      };
    }

    /** If-Match of a write: the versions it accepts, `'*'`, or undefined (unconditional). */
    const ifMatch = (ctx: GatewayContext) => {
      const tags = parseEtags(ctx, 'If-Match');
      if (tags === undefined && requireIfMatch) throw preconditionRequired();
      return tags;
    };

    const send = (ctx: GatewayContext, entity: Entity, status = 200) => {
      ctx.set('ETag', etag(entity.version));
      ctx.set('Cache-Control', 'no-cache');
      respond(ctx, entity, { status });
    };

    const notFound = (type: string, id: number) =>
      new GatewayError('not_found', `${type} ${id} does not exist`, {
        code: 'entity_not_found',
        details: { type, id },
      });

    /** The write's body: a JSON object with valid field names. */
    const body = async (ctx: GatewayContext) => {
      requireJsonType(ctx);
      return checkFields(await readJsonObject(ctx));
    };

    /** Runs a conditional write; a version conflict under If-Match is the client's stale copy: 412. */
    const conditional = async <R>(type: string, id: number, run: () => Promise<R>): Promise<R> => {
      try {
        return await run();
      } catch (err) {
        if (isConflict(err)) {
          if (err.actualVersion === null) throw notFound(type, id);
          throw preconditionFailed(type, id, err.actualVersion);
        }
        throw err;
      }
    };

    /**
     * The version a conditional write must find: the listed one when If-Match names exactly one;
     * otherwise read the entity and check it against the list (or `*`, anything existing).
     */
    const expectedVersion = async (
      ctx: GatewayContext,
      type: string,
      id: number,
      tags: Set<number> | '*',
    ): Promise<number> => {
      if (tags !== '*' && tags.size === 1) return [...tags][0]!;
      const current = await store.get(type, id, { requestId: ctx.state.requestId });
      if (!current) throw notFound(type, id);
      if (tags !== '*' && !tags.has(current.version)) throw preconditionFailed(type, id, current.version);
      return current.version;
    };

    const handlers = {
      async list(ctx: GatewayContext) {
        const type = entityType(ctx);
        const request = listRequest(ctx, paging);
        const result = await store.query(type, request);
        ctx.set('Cache-Control', 'no-cache');
        respond(ctx, {
          items: result.items,
          limit: request.limit,
          offset: request.offset,
          ...(result.total !== undefined ? { total: result.total } : {}),
        });
      },

      async create(ctx: GatewayContext) {
        const type = entityType(ctx);
        const key = createKey(queryParams(ctx, ['key']));
        const data = await body(ctx);
        const entity = await store.create(type, data, { key, requestId: ctx.state.requestId });
        ctx.set('Location', `${ctx.path.replace(/\/+$/, '')}/${entity.id}`);
        send(ctx, entity, 201);
      },

      async read(ctx: GatewayContext) {
        const type = entityType(ctx);
        const id = entityId(ctx);
        const expand = expandPaths(queryParams(ctx, ['expand']).get('expand'));
        const noneMatch = parseEtags(ctx, 'If-None-Match');
        const entity = await store.get(type, id, { expand, requestId: ctx.state.requestId });
        if (!entity) throw notFound(type, id);
        if (noneMatch === '*' || noneMatch?.has(entity.version)) {
          ctx.set('ETag', etag(entity.version));
          respond(ctx, null, { status: 304 });
          return;
        }
        send(ctx, entity);
      },

      async replace(ctx: GatewayContext) {
        const type = entityType(ctx);
        const id = entityId(ctx);
        queryParams(ctx, []);
        const tags = ifMatch(ctx);
        const data = await body(ctx);
        const requestId = ctx.state.requestId;
        const updated = await conditional(type, id, async () => {
          const ifVersion = tags === undefined ? undefined : await expectedVersion(ctx, type, id, tags);
          return store.update(type, id, data, { ifVersion, requestId });
        });
        if (!updated) throw notFound(type, id);
        send(ctx, updated);
      },

      async merge(ctx: GatewayContext) {
        const type = entityType(ctx);
        const id = entityId(ctx);
        queryParams(ctx, []);
        const tags = ifMatch(ctx);
        const patch = await body(ctx);
        const requestId = ctx.state.requestId;
        for (let attempt = 1; ; attempt++) {
          const current = await store.get(type, id, { requestId });
          if (!current) throw notFound(type, id);
          if (tags !== undefined && tags !== '*' && !tags.has(current.version)) {
            throw preconditionFailed(type, id, current.version);
          }
          const data = mergePatch(current.data, patch) as Record<string, unknown>;
          try {
            const updated = await store.update(type, id, data, { ifVersion: current.version, requestId });
            if (!updated) throw notFound(type, id);
            send(ctx, updated);
            return;
          } catch (err) {
            // Someone wrote between our read and our write. Under If-Match the client's copy is
            // stale (412); without it, merge into the newer version (a few times, then 409).
            if (!isConflict(err)) throw err;
            if (err.actualVersion === null) throw notFound(type, id);
            if (tags !== undefined) throw preconditionFailed(type, id, err.actualVersion);
            if (attempt >= PATCH_ATTEMPTS) throw err;
          }
        }
      },

      async remove(ctx: GatewayContext) {
        const type = entityType(ctx);
        const id = entityId(ctx);
        queryParams(ctx, []);
        const tags = ifMatch(ctx);
        const requestId = ctx.state.requestId;
        const deleted = await conditional(type, id, async () => {
          const ifVersion = tags === undefined ? undefined : await expectedVersion(ctx, type, id, tags);
          return store.delete(type, id, { ifVersion, requestId });
        });
        if (!deleted) throw notFound(type, id);
        respond(ctx, null);
      },
    };

    return {
      async handle(ctx) {
        const onItem = 'id' in (ctx.params as object);
        const method = ctx.method === 'HEAD' ? 'GET' : ctx.method;
        const table: Record<string, (ctx: GatewayContext) => Promise<void>> = onItem
          ? { GET: handlers.read, PUT: handlers.replace, PATCH: handlers.merge, DELETE: handlers.remove }
          : { GET: handlers.list, POST: handlers.create };
        const handler = table[method];
        if (!handler) {
          const allowed = Object.keys(table);
          throw new GatewayError('method_not_allowed', `Method ${ctx.method} is not allowed here`, {
            details: { allowed },
            headers: { Allow: allowed.join(', ') },
          });
        }
        await handler(ctx);
      },
      describe: () => ({ store: options.store, require_if_match: requireIfMatch, max_limit: maxLimit }),
    };
  },
});
