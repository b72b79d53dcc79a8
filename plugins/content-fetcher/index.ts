/**
 * The `content-fetcher` resource: reads web pages as text for other stages (see api.ts for the
 * contract and fetcher.ts for how a fetch is checked and bounded).
 *
 *   resources:
 *     fetcher:
 *       type: content-fetcher
 *       allow: [127.0.0.1:8999, 10.20.0.0/16]   # exceptions to the private-address refusal
 *       max_bytes: 2097152
 *       extract_timeout_ms: 5000   # HTML → text runs in worker threads, terminated past this
 */
import { defineResource, type FromSchema, type JsonSchema, latencyBuckets } from '../../runtime/index.ts';
import type { ContentFetcher } from './api.ts';
import { createContentFetcher, type FetcherConfig, fetcherDefaults } from './fetcher.ts';

const ms = (def: number, description: string) => ({ type: 'integer', minimum: 1, default: def, description }) as const;

/**
 * Every field defaulted (from fetcherDefaults: one place for each value); `allow` is a list, or one
 * string of entries separated by commas or spaces (handy with ${VAR}).
 */
const optionsSchema = {
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
    extract_timeout_ms: ms(
      fetcherDefaults.extract_timeout_ms,
      'Time allowed to turn one HTML page into text (in a worker thread, terminated past it): the page then fails as a timeout.',
    ),
    extract_max_chars: {
      type: 'integer',
      minimum: 1024,
      default: fetcherDefaults.extract_max_chars,
      description:
        'HTML beyond this many characters is cut off before extraction (the text comes from the start of the page).',
    },
    extract_workers: {
      type: 'integer',
      minimum: 1,
      maximum: 16,
      default: fetcherDefaults.extract_workers,
      description: 'Worker threads that extract text from HTML, at most; pages beyond them wait in order.',
    },
    extract_max_heap_mb: {
      type: 'integer',
      minimum: 32,
      maximum: 4096,
      default: fetcherDefaults.extract_max_heap_mb,
      description: 'Heap cap of each extraction worker: a page that needs more fails, its worker is replaced.',
    },
    extract_idle_ms: ms(
      fetcherDefaults.extract_idle_ms,
      'An idle extraction worker exits after this long (its memory returned).',
    ),
  },
} as const satisfies JsonSchema;
type FetcherOptions = FromSchema<typeof optionsSchema>;

export default defineResource<FetcherOptions, ContentFetcher>({
  type: 'content-fetcher',
  description: 'Fetches web pages as clean text (HTML via Readability, text/plain as is), refusing private addresses.',
  options: optionsSchema,
  create(options, env) {
    const allow = typeof options.allow === 'string' ? options.allow.split(/[\s,]+/).filter(Boolean) : options.allow;
    const config: FetcherConfig = { ...options, allow };
    const fetches = env.metrics.counter({
      name: 'switchyard_fetch_content_total',
      help: 'Pages fetched by the content fetcher, by outcome (ok, refused, bad_url, timeout, extract_timeout, error, too_large, unsupported)',
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
      extract_timeout_ms: config.extract_timeout_ms,
      extract_max_chars: config.extract_max_chars,
      extract_workers: config.extract_workers,
      extract_max_heap_mb: config.extract_max_heap_mb,
    };
    return { value: fetcher, describe: () => described, close: () => fetcher.close() };
  },
});
