/**
 * `embed-process` (POST /v1/process): `{url, config?}` → fetch the page through the content
 * fetcher resource, split it with the chunker resource, embed every chunk, answer
 * `{url, config, chunks, embeddings, error}`. A failed fetch is still 200, with
 * `error: "Failed to scrape content"` and empty maps (the seed), and is not cached. Successful
 * results are cached by URL and resolved config (process-cache.ts); `X-Cache` says HIT or MISS.
 * Identical requests that arrive while one is being computed wait for it instead of redoing it.
 */
import {
  canonicalJson,
  definePlugin,
  type FromSchema,
  GatewayError,
  type JsonSchema,
  readJsonObject,
  respond,
  sha256Hex,
} from '../../runtime/index.ts';
import { loggableUrl } from '../content-fetcher/api.ts';
import type { Chunker, ContentFetcher } from './api.ts';
import { passThrough } from './errors.ts';
import { cacheSchema, ProcessCache } from './process-cache.ts';
import { type EmbedConfig, readUrl, rejectUnknownFields, resolveConfig } from './request.ts';
import { sharedContext, sharedProperties } from './stage-options.ts';

export const SCRAPE_FAILED = 'Failed to scrape content';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...sharedProperties,
    chunker: { type: 'string', default: 'chunker', description: 'The chunker resource.' },
    fetcher: { type: 'string', default: 'fetcher', description: 'The content fetcher resource.' },
    max_chunks: {
      type: 'integer',
      minimum: 1,
      default: 2048,
      description: 'Chunks per page; a page that gives more is refused (400) with a hint to raise chunking_size.',
    },
    fetch_timeout_ms: { type: 'integer', minimum: 1, default: 30_000 },
    cache: cacheSchema,
  },
} as const satisfies JsonSchema;
type ProcessStageOptions = FromSchema<typeof optionsSchema>;

export interface ProcessResult {
  url: string;
  config: EmbedConfig;
  chunks: Record<string, string>;
  embeddings: Record<string, number[]>;
  error: string | null;
}

export default definePlugin<ProcessStageOptions>({
  name: 'embed-process',
  description:
    'POST /v1/process of the embedding service: fetch a URL, chunk its text, embed the chunks; results cached (terminal stage).',
  options: optionsSchema,
  async create(options, env) {
    const shared = sharedContext(options, env);
    const chunker = shared.chunker as Chunker;
    const fetcher = env.resource<ContentFetcher>(options.fetcher);
    const maxChunks = options.max_chunks;
    const fetchTimeoutMs = options.fetch_timeout_ms;
    const cache = await ProcessCache.open(options.cache, env.resolvePath, env.logger);
    const inflight = new Map<string, Promise<{ body: string; cacheable: boolean }>>();
    const lookups = env.metrics.counter({
      name: 'switchyard_embed_process_cache_total',
      help: '/v1/process answers by cache result (hit, miss)',
      labelNames: ['result'] as const,
    });
    const scrapeFailures = env.metrics.counter({
      name: 'switchyard_embed_process_scrape_failures_total',
      help: '/v1/process requests whose URL could not be fetched',
    });

    async function compute(url: string, config: EmbedConfig): Promise<{ body: string; cacheable: boolean }> {
      let text: string;
      try {
        ({ text } = await fetcher.fetchText(url, { signal: AbortSignal.timeout(fetchTimeoutMs) }));
      } catch (err) {
        scrapeFailures.inc();
        // The query string may hold a token (?access_token=): logs get scheme, host and path only.
        env.logger.info({ url: loggableUrl(url), err: (err as Error).message }, 'process: fetch failed');
        const failed: ProcessResult = { url, config, chunks: {}, embeddings: {}, error: SCRAPE_FAILED };
        return { body: JSON.stringify(failed), cacheable: false };
      }
      const chunks = await passThrough('Chunking failed', () =>
        chunker.chunk(text, { type: config.chunking_type, size: config.chunking_size }),
      );
      if (chunks.length > maxChunks) {
        throw new GatewayError(
          'bad_request',
          `The page gives ${chunks.length} chunks of ${config.chunking_size} words; the limit is ${maxChunks}: use a larger chunking_size`,
        );
      }
      const vectors = await passThrough('Embedding failed', () =>
        shared.models.embed(config.embedding_model, chunks, { inputType: 'passage' }),
      );
      const result: ProcessResult = {
        url,
        config,
        chunks: Object.fromEntries(chunks.map((chunk, i) => [String(i), chunk])),
        embeddings: Object.fromEntries(vectors.map((vector, i) => [String(i), vector])),
        error: null,
      };
      return { body: JSON.stringify(result), cacheable: true };
    }

    return {
      async handle(ctx) {
        const body = await readJsonObject(ctx);
        rejectUnknownFields(body, ['url', 'config'], 'request');
        const url = readUrl(body.url);
        const config = resolveConfig(body.config, shared.defaults, shared.models, shared.chunkingTypes());
        const key = sha256Hex(canonicalJson({ url, config }));

        let answer = await cache.get(key);
        const hit = answer !== undefined;
        if (answer === undefined) {
          let pending = inflight.get(key);
          if (!pending) {
            pending = compute(url, config).finally(() => inflight.delete(key));
            inflight.set(key, pending);
            const { body: computed, cacheable } = await pending;
            if (cacheable) await cache.set(key, computed);
          }
          answer = (await pending).body;
        }
        lookups.inc({ result: hit ? 'hit' : 'miss' });
        ctx.set('X-Cache', hit ? 'HIT' : 'MISS');
        respond(ctx, answer, { type: 'application/json' });
      },
      describe: () => ({ defaults: shared.defaults, max_chunks: maxChunks, cache: cache.stats() }),
      close: () => cache.close(),
    };
  },
});
