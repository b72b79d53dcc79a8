/**
 * fan-out: takes the URLs listed on the request state (e.g. `searchResults`, left by the
 * `web-search` stage), runs each through a processor that turns a page into text chunks, at most
 * `concurrency` at a time and each within `timeout_ms`, and answers with every chunk in one
 * numbered map: `{"0": [url, text], "1": [url, text], ...}`, in the order of the list, then of the
 * chunks within a page (terminal stage).
 *
 * Only http(s) URLs are taken, each once, the first `max_items` of them. A page that fails (an
 * unreachable site, a timeout, a PDF...) is left out and the others are still answered; only when
 * every page failed is the answer an error (`failure`), as then there is nothing to give. An empty
 * list is an empty map.
 */
import {
  compileStatePath,
  deadline,
  definePlugin,
  type FromSchema,
  GatewayError,
  type HttpUpstream,
  isHttpUpstream,
  type JsonSchema,
  latencyBuckets,
  respond,
  stateFieldOf,
} from '../../runtime/index.ts';
import type { Chunker } from '../chunker/api.ts';
import { type ContentFetcher, loggableUrl } from '../content-fetcher/api.ts';
import { httpProcessor } from './http-processor.ts';
import { localProcessor } from './local-processor.ts';
import { mapBounded } from './pool.ts';
import type { UrlProcessor } from './processor.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['processor'],
  properties: {
    from: {
      type: 'string',
      minLength: 1,
      default: 'searchResults',
      description: 'State path of the list: strings, or objects with a URL field.',
    },
    url_field: { type: 'string', minLength: 1, default: 'url', description: 'URL field of the list objects.' },
    max_items: { type: 'integer', minimum: 1, maximum: 100, default: 10, description: 'URLs processed at most.' },
    concurrency: { type: 'integer', minimum: 1, maximum: 100, default: 5, description: 'Pages processed at once.' },
    timeout_ms: { type: 'integer', minimum: 1, default: 30000, description: 'Deadline of one page.' },
    processor: {
      enum: ['local', 'http'],
      description: '`local`: the fetcher and chunker resources of `local`; `http`: the endpoint of `http`.',
    },
    local: {
      type: 'object',
      additionalProperties: false,
      required: ['fetcher', 'chunker'],
      properties: {
        fetcher: { type: 'string', 'x-ref': 'resource', description: 'A content-fetcher resource.' },
        chunker: { type: 'string', 'x-ref': 'resource', description: 'A chunker resource.' },
        type: { type: 'string', minLength: 1, default: 'words', description: 'Chunking type.' },
        size: { type: 'integer', minimum: 1, default: 100, description: 'Chunk size (words, for `words`).' },
      },
    },
    http: {
      type: 'object',
      additionalProperties: false,
      required: ['upstream'],
      properties: {
        upstream: { type: 'string', 'x-ref': 'upstream', description: 'An http upstream: the processor.' },
        path: { type: 'string', pattern: '^/', default: '/v1/process' },
        config: {
          type: 'object',
          default: {},
          description: 'Sent as `config` next to `url`, e.g. {chunking_type: words, chunking_size: 100}.',
        },
        max_bytes: {
          type: 'integer',
          minimum: 1024,
          default: 33554432,
          description: 'Cap on one answer (it carries embeddings too).',
        },
      },
    },
    failure: {
      type: 'object',
      additionalProperties: false,
      default: {},
      description: 'Status and message when every page failed.',
      properties: {
        status: { type: 'integer', minimum: 500, maximum: 599, default: 502 },
        message: { type: 'string', minLength: 1, default: 'Content processing failed' },
      },
    },
  },
} as const satisfies JsonSchema;

type FanOutOptions = FromSchema<typeof optionsSchema>;

/** The distinct http(s) URLs of a list of strings or of objects with a URL field, in order. */
function urlsOf(list: unknown, field: string, max: number): string[] {
  if (!Array.isArray(list)) return [];
  const seen = new Set<string>();
  for (const item of list) {
    const url = typeof item === 'string' ? item : (item as Record<string, unknown> | null)?.[field];
    if (typeof url !== 'string' || !/^https?:\/\//i.test(url) || seen.has(url)) continue;
    seen.add(url);
    if (seen.size === max) break;
  }
  return [...seen];
}

export default definePlugin<FanOutOptions>({
  name: 'fan-out',
  description:
    'Turn the URLs on the request state into text chunks through a processor, concurrently with a bound; answer {"0": [url, text], ...}.',
  // Without the list every request would answer an empty map.
  needs: (o) => stateFieldOf(o.from),
  options: optionsSchema,
  create(options, env) {
    const readList = compileStatePath(options.from);
    const field = options.url_field;
    const maxItems = options.max_items;
    const concurrency = options.concurrency;
    const timeoutMs = options.timeout_ms;
    const failure = options.failure;

    let processor: UrlProcessor;
    if (options.processor === 'local') {
      if (!options.local) throw new Error('processor "local" needs the `local` options (fetcher, chunker)');
      const { type, size } = options.local;
      const chunker = env.resource<Chunker>(options.local.chunker);
      if (!chunker.types.includes(type)) {
        throw new Error(
          `chunker "${options.local.chunker}" has no type "${type}" (it has: ${chunker.types.join(', ')})`,
        );
      }
      processor = localProcessor(env.resource<ContentFetcher>(options.local.fetcher), chunker, type, size);
    } else {
      if (!options.http) throw new Error('processor "http" needs the `http` options (upstream)');
      const upstream = env.upstream(options.http.upstream);
      if (!isHttpUpstream(upstream)) throw new Error(`upstream "${options.http.upstream}" is not an http upstream`);
      processor = httpProcessor(
        upstream as HttpUpstream,
        options.http.path,
        options.http.config,
        options.http.max_bytes,
      );
    }

    const pages = env.metrics.counter({
      name: 'switchyard_fan_out_items_total',
      help: 'Pages processed by the fan-out stage, by route and outcome (ok, failed)',
      labelNames: ['route', 'outcome'] as const,
    });
    const pageSeconds = env.metrics.histogram({
      name: 'switchyard_fan_out_item_duration_seconds',
      help: 'Time to turn one page into chunks',
      buckets: latencyBuckets,
    });

    return {
      async handle(ctx) {
        const urls = urlsOf(readList(ctx.state), field, maxItems);
        // Pages still running are cancelled when the client goes away.
        const gone = new AbortController();
        const onClose = () => {
          if (!ctx.res.writableFinished) gone.abort();
        };
        ctx.res.once('close', onClose);
        const context = { requestId: ctx.state.requestId, traceparent: ctx.state.traceparent, trace: ctx.state.trace };
        let results: Array<string[] | undefined>;
        try {
          results = await mapBounded(urls, concurrency, async (url) => {
            const started = performance.now();
            const limit = deadline(timeoutMs, gone.signal);
            try {
              const chunks = await processor.chunks(url, { ...context, signal: limit.signal });
              pages.inc({ route: ctx.state.route, outcome: 'ok' });
              return chunks;
            } catch (err) {
              pages.inc({ route: ctx.state.route, outcome: 'failed' });
              env.logger.debug(
                { url: loggableUrl(url), err: (err as Error).message, request_id: ctx.state.requestId },
                'page failed',
              );
              return undefined;
            } finally {
              limit.clear();
              pageSeconds.observe((performance.now() - started) / 1000);
            }
          });
        } finally {
          ctx.res.off('close', onClose);
        }
        if (urls.length > 0 && results.every((r) => r === undefined)) {
          env.logger.warn({ pages: urls.length, request_id: ctx.state.requestId }, 'every page failed');
          throw new GatewayError('upstream_error', failure.message, { status: failure.status });
        }
        const map: Record<string, [string, string]> = {};
        let id = 0;
        results.forEach((chunks, i) => {
          for (const text of chunks ?? []) map[String(id++)] = [urls[i], text];
        });
        respond(ctx, map);
      },
      describe: () => ({ processor: options.processor, max_items: maxItems, concurrency, timeout_ms: timeoutMs }),
    };
  },
});
