/**
 * The `web-search` stage: reads the query from a query-string parameter, asks a `web-search`
 * resource, and leaves the results on `ctx.state.searchResults` for the stages after it (e.g.
 * `fan-out`). The wording and status of its two errors are options, so a service can keep the
 * exact messages of its specification.
 */
import { definePlugin, type FromSchema, GatewayError, type JsonSchema } from '../../runtime/index.ts';
import type { WebSearch } from './api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['search'],
  properties: {
    search: { type: 'string', 'x-ref': 'resource', description: 'A web-search resource.' },
    param: { type: 'string', minLength: 1, default: 'q', description: 'Query-string parameter holding the query.' },
    missing_message: {
      type: 'string',
      minLength: 1,
      description: "400 message when the parameter is missing or blank (default: Missing query parameter '<param>').",
    },
    failure: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Status and message when the backend cannot be reached or answers no result list.',
      properties: {
        status: { type: 'integer', minimum: 500, maximum: 599, default: 502 },
        message: { type: 'string', minLength: 1, default: 'Failed to fetch search results' },
      },
    },
  },
} as const satisfies JsonSchema;
type WebSearchStageOptions = FromSchema<typeof optionsSchema>;

export const webSearchStage = definePlugin<WebSearchStageOptions>({
  name: 'web-search',
  description:
    'Run the query of a query-string parameter through a web-search resource; results go to state.searchResults.',
  provides: ['searchResults'],
  options: optionsSchema,
  create(options, env) {
    const search = env.resource<WebSearch>(options.search);
    const param = options.param;
    const missing = options.missing_message ?? `Missing query parameter '${param}'`;
    const failure = options.failure;
    const failures = env.metrics.counter({
      name: 'switchyard_web_search_failures_total',
      help: 'Searches that failed at the backend, by route',
      labelNames: ['route'] as const,
    });

    return async (ctx, next) => {
      const raw = ctx.query[param];
      // A repeated parameter counts by its first value, as most web frameworks read it.
      const query = (Array.isArray(raw) ? raw[0] : raw)?.trim();
      if (!query) throw new GatewayError('bad_request', missing, { details: { param } });
      const abort = new AbortController();
      const onClose = () => {
        if (!ctx.res.writableFinished) abort.abort();
      };
      ctx.res.once('close', onClose);
      try {
        ctx.state.searchResults = await search.search(query, { signal: abort.signal, trace: ctx.state.trace });
      } catch (err) {
        if (abort.signal.aborted) throw err;
        failures.inc({ route: ctx.state.route });
        env.logger.warn({ err: (err as Error).message, request_id: ctx.state.requestId }, 'search backend failed');
        throw new GatewayError('upstream_error', failure.message, { status: failure.status, cause: err });
      } finally {
        ctx.res.off('close', onClose);
      }
      await next();
    };
  },
});
