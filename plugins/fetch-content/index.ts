/**
 * The `content-fetcher` resource: reads web pages as text for other stages (see api.ts for the
 * contract and fetcher.ts for how a fetch is checked and bounded).
 *
 *   resources:
 *     fetcher:
 *       type: content-fetcher
 *       allow: [127.0.0.1:8999, 10.20.0.0/16]   # exceptions to the private-address refusal
 *       max_bytes: 2097152
 */
import { defineResource, latencyBuckets } from '../../runtime/index.ts';
import type { ContentFetcher } from './api.ts';
import { createContentFetcher, type FetcherConfig, fetcherDefaults } from './fetcher.ts';

interface FetcherOptions extends Partial<Omit<FetcherConfig, 'allow'>> {
  /** A list, or one string of entries separated by commas or spaces (handy with ${VAR}). */
  allow?: string[] | string;
}

const ms = (def: number, description: string) => ({ type: 'integer', minimum: 1, default: def, description });

export default defineResource<FetcherOptions, ContentFetcher>({
  type: 'content-fetcher',
  description: 'Fetches web pages as clean text (HTML via Readability, text/plain as is), refusing private addresses.',
  options: {
    type: 'object',
    additionalProperties: false,
    properties: {
      allow: {
        type: ['array', 'string'],
        items: { type: 'string' },
        default: [],
        description:
          'Exceptions to the refusal of private, loopback and reserved addresses: CIDRs (10.0.0.0/8, ::1/128), ' +
          'addresses, or host:port (localhost:8080, 127.0.0.1:*). A string is split on commas and spaces.',
      },
      connect_timeout_ms: ms(fetcherDefaults.connect_timeout_ms, 'Time allowed to open the connection.'),
      read_timeout_ms: ms(fetcherDefaults.read_timeout_ms, 'Time allowed for the headers, and between body chunks.'),
      total_timeout_ms: ms(fetcherDefaults.total_timeout_ms, 'Deadline of a whole fetch, redirects included.'),
      max_bytes: {
        type: 'integer',
        minimum: 1024,
        default: fetcherDefaults.max_bytes,
        description: 'Cap on the decoded body size (413 payload_too_large above it).',
      },
      max_redirects: { type: 'integer', minimum: 0, maximum: 20, default: fetcherDefaults.max_redirects },
      user_agent: { type: 'string', minLength: 1, default: fetcherDefaults.user_agent },
    },
  },
  create(options, env) {
    const allow =
      typeof options.allow === 'string' ? options.allow.split(/[\s,]+/).filter(Boolean) : (options.allow ?? []);
    const config: FetcherConfig = { ...fetcherDefaults, ...options, allow };
    const fetches = env.metrics.counter({
      name: 'switchyard_fetch_content_total',
      help: 'Pages fetched by the content fetcher, by outcome (ok, refused, bad_url, timeout, error, too_large, unsupported)',
      labelNames: ['outcome'] as const,
    });
    const duration = env.metrics.histogram({
      name: 'switchyard_fetch_content_duration_seconds',
      help: 'Time to fetch and extract a page, redirects included',
      buckets: latencyBuckets,
    });
    const fetcher = createContentFetcher(config, {
      onOutcome(outcome, seconds) {
        fetches.inc({ outcome });
        duration.observe(seconds);
      },
    });
    const described = {
      allow: config.allow,
      connect_timeout_ms: config.connect_timeout_ms,
      read_timeout_ms: config.read_timeout_ms,
      total_timeout_ms: config.total_timeout_ms,
      max_bytes: config.max_bytes,
      max_redirects: config.max_redirects,
    };
    return { value: fetcher, describe: () => described };
  },
});
