/**
 * openapi-document: the service's OpenAPI 3.1 description, generated from the running graph:
 * every route and method, documented by the describers its stages registered (api.ts), merged
 * in pipeline order. Built on the first request of a graph and kept (a reload builds a new one).
 *
 * Paths are the routes' patterns written the OpenAPI way: `:id` → `{id}`, an optional trailing
 * slash `{/}` → `/` (FastAPI's style, `/entities/`). Routes with a wildcard (`*rest`, static
 * files) and routes a describer hides are left out.
 */
import { definePlugin, type FromSchema, type JsonSchema, type PluginEnv, respond } from '../../runtime/index.ts';
import { type Contribution, describerOf, describeStage, type Operation } from './api.ts';

/** `/entities{/}` → `/entities/`, `/entities/:entity_id` → `/entities/{entity_id}`; undefined for wildcards. */
export function openApiPath(pattern: string): string | undefined {
  if (pattern.includes('*')) return undefined;
  return pattern
    .replaceAll('{/}', '/')
    .replace(/\{[^}]*\}/g, '')
    .replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}');
}

function merge(into: Operation, add: Operation): void {
  for (const [k, v] of Object.entries(add) as Array<[keyof Operation, unknown]>) {
    if (v === undefined) continue;
    if (k === 'description' && into.description) into.description = `${into.description}\n\n${v}`;
    else if (k === 'parameters') into.parameters = [...(into.parameters ?? []), ...(v as unknown[])];
    else if (k === 'responses') into.responses = { ...(into.responses ?? {}), ...(v as Record<string, unknown>) };
    else (into as Record<string, unknown>)[k] = v;
  }
}

export function buildDocument(env: PluginEnv, options: DocumentOptions): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const schemas: Record<string, unknown> = {};
  const securitySchemes: Record<string, unknown> = {};
  const ids = new Set<string>();
  for (const route of env.introspect().routes) {
    const path = openApiPath(route.path);
    if (!path) continue;
    for (const method of route.methods.filter((x) => x !== 'HEAD')) {
      const ctx = { method, path, resource: <T>(name: string) => env.resource<T>(name) };
      const operation: Operation = {};
      let hidden = false;
      for (const stage of route.stages) {
        const c: Contribution | undefined = describerOf(stage.plugin)?.(stage.options, ctx);
        if (!c) continue;
        if (c.hide) hidden = true;
        if (c.operation) merge(operation, c.operation);
        Object.assign(schemas, c.schemas);
        Object.assign(securitySchemes, c.securitySchemes);
      }
      if (hidden) continue;
      operation.summary ??= `${method} ${path}`;
      operation.responses ??= { 200: { description: 'OK' } };
      // FastAPI-like ids: get_entities__entity_id_
      let id = `${method.toLowerCase()}_${path.replace(/[^A-Za-z0-9]+/g, '_').replace(/^_/, '')}`;
      while (ids.has(id)) id += '_';
      ids.add(id);
      operation.operationId ??= id;
      paths[path] ??= {};
      paths[path][method.toLowerCase()] = operation;
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: options.title ?? env.service.name,
      version: options.version ?? env.service.version,
      ...(options.description ? { description: options.description } : {}),
    },
    paths,
    components: {
      schemas,
      ...(Object.keys(securitySchemes).length > 0 ? { securitySchemes } : {}),
    },
  };
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    title: { type: 'string', description: 'Default: the service name.' },
    version: { type: 'string', description: 'Default: the service version.' },
    description: { type: 'string' },
  },
} as const satisfies JsonSchema;
type DocumentOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<DocumentOptions>({
  name: 'openapi-document',
  description: "Answer the service's OpenAPI 3.1 description, generated from its routes and stages.",
  options: optionsSchema,
  create(options, env) {
    let body: string | undefined;
    return async (ctx) => {
      // The graph is complete only once built: generate on first use.
      body ??= JSON.stringify(buildDocument(env, options));
      respond(ctx, body, { type: 'application/json' });
    };
  },
});

describeStage('openapi-document', () => ({ hide: true }));
