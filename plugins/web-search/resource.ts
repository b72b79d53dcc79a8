/**
 * The `web-search` resource: a meta-search backend (SearXNG or anything answering its JSON API)
 * reached through an `http` upstream, so the service's health and readiness see it.
 *
 *   upstreams:
 *     searxng: { kind: http, url: "http://localhost:8888" }
 *   resources:
 *     search: { type: web-search, upstream: searxng, params: { categories: general } }
 */
import type { Readable } from 'node:stream';
import {
  deadline,
  defineResource,
  type FromSchema,
  GatewayError,
  type HttpUpstream,
  isHttpUpstream,
  type JsonSchema,
} from '../../runtime/index.ts';
import type { SearchHit, SearchOptions, WebSearch } from './api.ts';
import { parseSearxng } from './searxng.ts';

async function readCapped(body: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new Error(`the answer is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['upstream'],
  properties: {
    upstream: { type: 'string', 'x-ref': 'upstream', description: 'An http upstream: the backend base URL.' },
    path: { type: 'string', pattern: '^/', default: '/search', description: 'Search path under the upstream.' },
    params: {
      type: 'object',
      additionalProperties: { type: 'string' },
      default: {},
      description: 'Extra query parameters sent with every search (categories, language, engines, safesearch...).',
    },
    timeout_ms: { type: 'integer', minimum: 1, default: 10000, description: 'Deadline of one search.' },
    max_bytes: { type: 'integer', minimum: 1024, default: 4194304, description: 'Cap on the answer size.' },
  },
} as const satisfies JsonSchema;
type WebSearchOptions = FromSchema<typeof optionsSchema>;

export const webSearchResource = defineResource<WebSearchOptions, WebSearch>({
  type: 'web-search',
  description: 'Meta-search backend with a SearXNG-compatible JSON API (GET /search?q=&format=json), over an upstream.',
  options: optionsSchema,
  create(options, env) {
    const declared = env.upstream(options.upstream);
    if (!isHttpUpstream(declared)) throw new Error(`upstream "${options.upstream}" is not an http upstream`);
    const upstream: HttpUpstream = declared;
    const path = options.path;
    const params = options.params;
    const timeoutMs = options.timeout_ms;
    const maxBytes = options.max_bytes;

    async function search(query: string, signal: AbortSignal, trace: SearchOptions['trace']): Promise<SearchHit[]> {
      const qs = new URLSearchParams({ ...params, q: query, format: 'json' });
      const res = await upstream.forward({
        method: 'GET',
        path: `${path}?${qs}`,
        headers: { accept: 'application/json' },
        signal,
        timeoutMs,
        ...(trace ? { trace } : {}),
      });
      if (res.status !== 200) {
        res.body.resume();
        // SearXNG answers 403 when `json` is not among the formats of its settings.yml.
        const hint = res.status === 403 ? ' (is "json" in search.formats of the SearXNG settings?)' : '';
        throw new GatewayError('upstream_error', `Search backend answered ${res.status}${hint}`, {
          details: { upstream: options.upstream, status: res.status },
        });
      }
      const raw = await readCapped(res.body, maxBytes);
      try {
        return parseSearxng(JSON.parse(raw.toString('utf8')));
      } catch (err) {
        throw new GatewayError(
          'upstream_error',
          `Search backend answered an unreadable result list: ${(err as Error).message}`,
          {
            details: { upstream: options.upstream },
          },
        );
      }
    }

    return {
      value: {
        async search(query, opts = {}) {
          const limit = deadline(timeoutMs, opts.signal);
          try {
            return await search(query, limit.signal, opts.trace);
          } catch (err) {
            if (err instanceof GatewayError && !limit.signal.aborted) throw err;
            if (limit.expired) {
              throw new GatewayError('upstream_timeout', `Search backend did not answer within ${timeoutMs} ms`, {
                details: { upstream: options.upstream, timeout_ms: timeoutMs },
              });
            }
            if (err instanceof GatewayError) throw err;
            throw new GatewayError('upstream_error', `Search failed: ${(err as Error).message}`, {
              details: { upstream: options.upstream },
              cause: err,
            });
          } finally {
            limit.clear();
          }
        },
      },
      describe: () => ({ upstream: options.upstream, path, params, timeout_ms: timeoutMs }),
    };
  },
});
