/**
 * The content fetcher: GET a page with undici and return its text.
 *
 * Every hop (the URL, then each redirect, followed by hand) is checked before anything is sent:
 * the host name is resolved here, every address it resolves to must pass the address policy, and
 * the connection is made to the address that was checked (a per-hop undici Agent whose `lookup`
 * returns it), so a DNS answer that changes between the check and the connect (DNS rebinding)
 * cannot reach an internal address. Time is bounded three ways: connect, read (headers and each
 * gap between body chunks) and a total deadline over all hops.
 */
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import type { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { deadline, GatewayError } from '../../runtime/index.ts';
import { type AddressPolicy, createAddressPolicy } from './address-policy.ts';
import type { ContentFetcher, FetchedContent, FetchTextOptions } from './api.ts';
import { decodeText } from './decode.ts';
import { ExtractFailedError, ExtractPool, ExtractTimeoutError } from './extract-pool.ts';
import { loggableUrl } from './loggable-url.ts';
import { readCapped, TooLargeError, UnsupportedEncodingError } from './read-body.ts';

export interface FetcherConfig {
  /** CIDRs and host:port entries let through the private-address check. */
  allow: string[];
  connect_timeout_ms: number;
  /** Time allowed for the response headers, and between two body chunks. */
  read_timeout_ms: number;
  /** Deadline of the whole fetch, redirects included. */
  total_timeout_ms: number;
  /** Cap on the (decoded) body size. */
  max_bytes: number;
  max_redirects: number;
  user_agent: string;
  /** Time allowed to turn one HTML page into text, in a worker thread. */
  extract_timeout_ms: number;
  /** HTML beyond this many characters is cut off before extraction. */
  extract_max_chars: number;
  /** Extraction worker threads at most. */
  extract_workers: number;
  /** Heap cap of each extraction worker. */
  extract_max_heap_mb: number;
  /** An idle extraction worker exits after this long. */
  extract_idle_ms: number;
}

export const fetcherDefaults: FetcherConfig = {
  allow: [],
  connect_timeout_ms: 5000,
  read_timeout_ms: 10000,
  total_timeout_ms: 20000,
  max_bytes: 2 * 1024 * 1024,
  max_redirects: 5,
  user_agent: 'Mozilla/5.0 (compatible; Switchyard content-fetcher)',
  extract_timeout_ms: 5000,
  extract_max_chars: 1024 * 1024,
  extract_workers: 2,
  extract_max_heap_mb: 256,
  extract_idle_ms: 5000,
};

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Host name → every address it resolves to. Injected by tests to play a rebinding DNS server. */
export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export type FetchOutcome =
  | 'ok'
  | 'refused'
  | 'bad_url'
  | 'timeout'
  | 'extract_timeout'
  | 'error'
  | 'too_large'
  | 'unsupported';

export interface FetcherHooks {
  resolve?: Resolver;
  /** Called once per fetch with how it ended and how long it took (metrics). */
  onOutcome?(outcome: FetchOutcome, seconds: number): void;
}

const htmlTypes = new Set(['text/html', 'application/xhtml+xml']);
const textTypes = new Set(['text/plain']);
const redirectStatuses = new Set([301, 302, 303, 307, 308]);

const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true, verbatim: true });

/** A `lookup` for net.connect that answers the already checked address, whatever DNS says now. */
function pinnedLookup(target: ResolvedAddress): LookupFunction {
  return (_hostname, options, callback) => {
    if (options?.all) (callback as (e: null, a: ResolvedAddress[]) => void)(null, [target]);
    else callback(null, target.address, target.family);
  };
}

/** An absolute http(s) URL, or a bad_request naming what is wrong with it. */
export function parseFetchUrl(input: string): URL {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    throw new GatewayError('bad_request', 'Invalid URL: expected an absolute http or https URL', {
      details: { url: loggableUrl(input) },
    });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new GatewayError(
      'bad_request',
      `Unsupported URL scheme "${url.protocol.slice(0, -1)}": only http and https`,
      {
        details: { url: loggableUrl(input) },
      },
    );
  }
  if (url.username || url.password) {
    throw new GatewayError('bad_request', 'URLs with credentials are not fetched', { details: { url: url.host } });
  }
  return url;
}

export interface ClosableContentFetcher extends ContentFetcher {
  /** Stops the extraction workers. */
  close(): Promise<void>;
}

export function createContentFetcher(config: FetcherConfig, hooks: FetcherHooks = {}): ClosableContentFetcher {
  const extractor = new ExtractPool({
    workers: config.extract_workers,
    timeoutMs: config.extract_timeout_ms,
    maxHeapMb: config.extract_max_heap_mb,
    idleMs: config.extract_idle_ms,
  });
  const policy: AddressPolicy = createAddressPolicy(config.allow);
  const resolve = hooks.resolve ?? systemResolver;

  /** Resolves and checks one hop; returns the address to connect to. */
  async function checkedAddress(url: URL, signal: AbortSignal): Promise<ResolvedAddress> {
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    const family = isIP(host);
    let addresses: ResolvedAddress[];
    if (family) addresses = [{ address: host, family }];
    else {
      try {
        addresses = await abortable(resolve(host), signal);
      } catch (err) {
        if (signal.aborted) throw err;
        throw new GatewayError('upstream_error', `Could not resolve host ${host}`, {
          details: { url: loggableUrl(url) },
          cause: err,
        });
      }
      if (addresses.length === 0) {
        throw new GatewayError('upstream_error', `Could not resolve host ${host}`, {
          details: { url: loggableUrl(url) },
        });
      }
    }
    if (!policy.allowsHost(url.hostname, port)) {
      // Every address must pass: a client could connect to any of them.
      for (const a of addresses) {
        if (!policy.allowsAddress(a.address)) {
          throw new GatewayError(
            'forbidden',
            `Refusing to fetch ${url.host}: it resolves to a private, loopback or reserved address`,
            { details: { url: loggableUrl(url) } },
          );
        }
      }
    }
    return addresses[0];
  }

  async function fetchOnce(input: string, signal: AbortSignal): Promise<FetchedContent> {
    let url = parseFetchUrl(input);
    for (let hop = 0; ; hop++) {
      const target = await checkedAddress(url, signal);
      const agent = new Agent({
        connect: { timeout: config.connect_timeout_ms, lookup: pinnedLookup(target) },
        headersTimeout: config.read_timeout_ms,
        bodyTimeout: config.read_timeout_ms,
        connections: 1,
      });
      try {
        const res = await request(url, {
          method: 'GET',
          dispatcher: agent,
          signal,
          headers: {
            'user-agent': config.user_agent,
            accept: 'text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.1',
            'accept-encoding': 'gzip, deflate, br',
          },
        });
        const body = res.body as unknown as Readable;
        const header = (name: string) => {
          const v = res.headers[name];
          return Array.isArray(v) ? v[0] : v;
        };
        if (redirectStatuses.has(res.statusCode)) {
          discard(body);
          const location = header('location');
          if (!location) throw upstream(`Redirect from ${loggableUrl(url)} has no Location`, url);
          if (hop >= config.max_redirects) {
            throw upstream(`Too many redirects (more than ${config.max_redirects})`, url);
          }
          let next: URL;
          try {
            next = new URL(location, url);
          } catch {
            throw upstream(`Redirect from ${loggableUrl(url)} to an invalid URL`, url);
          }
          if (next.protocol !== 'http:' && next.protocol !== 'https:') {
            throw upstream(
              `Redirect from ${loggableUrl(url)} to an unsupported scheme "${next.protocol.slice(0, -1)}"`,
              url,
            );
          }
          url = next;
          continue;
        }
        if (res.statusCode < 200 || res.statusCode > 299) {
          discard(body);
          throw new GatewayError(
            'upstream_error',
            `Fetching ${loggableUrl(url)} failed: the page answered ${res.statusCode}`,
            {
              details: { url: loggableUrl(url), status: res.statusCode },
            },
          );
        }
        const contentType = header('content-type');
        const mediaType = (contentType ?? '').split(';')[0].trim().toLowerCase();
        if (mediaType && !htmlTypes.has(mediaType) && !textTypes.has(mediaType)) {
          discard(body);
          throw new GatewayError(
            'unsupported_media_type',
            `Unsupported content type "${mediaType}": the fetcher reads text/html, application/xhtml+xml and text/plain`,
            { details: { url: loggableUrl(url), content_type: mediaType } },
          );
        }
        const declared = Number(header('content-length'));
        if (Number.isFinite(declared) && declared > config.max_bytes && !header('content-encoding')) {
          discard(body);
          throw new TooLargeError(config.max_bytes);
        }
        const bytes = await readCapped(body, header('content-encoding') ?? '', config.max_bytes);
        // No Content-Type: HTML if it looks like HTML, else refused rather than guessed.
        const type = mediaType || (looksLikeHtml(bytes) ? 'text/html' : '');
        if (!type) {
          throw new GatewayError('unsupported_media_type', 'The page has no Content-Type and does not look like HTML', {
            details: { url: loggableUrl(url) },
          });
        }
        const html = htmlTypes.has(type);
        const decoded = decodeText(bytes, contentType, html);
        const text = html ? await extract(extractor, decoded, url, config, signal) : decoded;
        return { url: url.href, text, contentType: type };
      } finally {
        agent.destroy().catch(() => {});
      }
    }
  }

  return {
    close: () => extractor.close(),
    async fetchText(input: string, options: FetchTextOptions = {}): Promise<FetchedContent> {
      const started = performance.now();
      const limit = deadline(config.total_timeout_ms, options.signal);
      let outcome: FetchOutcome = 'ok';
      try {
        return await fetchOnce(input, limit.signal);
      } catch (err) {
        const error = toFetchError(err, input, config, limit.expired, options.signal);
        outcome = outcomeOf(error);
        throw error;
      } finally {
        limit.clear();
        hooks.onOutcome?.(outcome, (performance.now() - started) / 1000);
      }
    },
  };
}

/** Drops an unread body: undici reports the destroy as an abort error, which nobody needs. */
function discard(body: Readable): void {
  body.on('error', () => {});
  body.destroy();
}

function upstream(message: string, url: URL): GatewayError {
  return new GatewayError('upstream_error', message, { details: { url: loggableUrl(url) } });
}

function looksLikeHtml(bytes: Buffer): boolean {
  return /^\s*(<!--[\s\S]*?-->\s*)*<(!doctype\s+html|html|head|body)[\s>]/i.test(
    bytes.subarray(0, 1024).toString('latin1'),
  );
}

/** HTML → text in a worker, its input cut to `extract_max_chars` (the start of a page holds its content). */
async function extract(
  pool: ExtractPool,
  html: string,
  url: URL,
  config: FetcherConfig,
  signal: AbortSignal,
): Promise<string> {
  const input = html.length > config.extract_max_chars ? html.slice(0, config.extract_max_chars) : html;
  try {
    return (await pool.run(input, signal)).text;
  } catch (err) {
    if (err instanceof ExtractTimeoutError) {
      throw new GatewayError(
        'upstream_timeout',
        `Extracting the text of the page took longer than ${config.extract_timeout_ms} ms`,
        { details: { url: loggableUrl(url), extract_timeout_ms: config.extract_timeout_ms }, code: 'extract_timeout' },
      );
    }
    if (err instanceof ExtractFailedError) {
      throw new GatewayError('upstream_error', `Could not extract text from the page: ${err.message}`, {
        details: { url: loggableUrl(url) },
        cause: err,
      });
    }
    throw err; // the fetch's own deadline or the caller's signal: reported by toFetchError
  }
}

/** Races a promise against an abort signal (DNS lookups cannot be cancelled). */
function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

const reasons: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed',
  UND_ERR_SOCKET: 'connection closed by the server',
  Z_DATA_ERROR: 'invalid compressed body',
  Z_BUF_ERROR: 'truncated compressed body',
  ERR_INVALID_CHAR: 'invalid response',
  HPE_INVALID_CONSTANT: 'invalid HTTP response',
};

function codeOf(err: unknown): string | undefined {
  const e = err as { code?: string; cause?: { code?: string } };
  return e?.code ?? e?.cause?.code;
}

/** Any failure as the GatewayError the contract promises. */
function toFetchError(
  err: unknown,
  input: string,
  config: FetcherConfig,
  expired: boolean,
  caller?: AbortSignal,
): GatewayError {
  if (err instanceof GatewayError) return err;
  const details = { url: loggableUrl(input) };
  if (err instanceof TooLargeError) {
    return new GatewayError('payload_too_large', `The page is larger than ${config.max_bytes} bytes`, {
      details: { ...details, limit_bytes: config.max_bytes },
    });
  }
  if (err instanceof UnsupportedEncodingError) return new GatewayError('upstream_error', err.message, { details });
  if (caller?.aborted) {
    const reason = caller.reason as { name?: string } | undefined;
    if (reason?.name === 'TimeoutError') {
      return new GatewayError('upstream_timeout', 'Fetching the page took longer than the caller allowed', { details });
    }
    return new GatewayError('upstream_error', 'Fetching the page was cancelled', { details, cause: err });
  }
  if (expired) {
    return new GatewayError('upstream_timeout', `Fetching the page took longer than ${config.total_timeout_ms} ms`, {
      details: { ...details, timeout_ms: config.total_timeout_ms },
    });
  }
  const code = codeOf(err);
  if (code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new GatewayError('upstream_timeout', `Could not connect within ${config.connect_timeout_ms} ms`, {
      details: { ...details, timeout_ms: config.connect_timeout_ms },
    });
  }
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new GatewayError('upstream_timeout', `The page sent nothing for ${config.read_timeout_ms} ms`, {
      details: { ...details, timeout_ms: config.read_timeout_ms },
    });
  }
  const reason = (code && reasons[code]) ?? code ?? (err as Error)?.message ?? String(err);
  return new GatewayError('upstream_error', `Fetching the page failed: ${reason}`, { details, cause: err });
}

function outcomeOf(err: GatewayError): FetchOutcome {
  switch (err.kind) {
    case 'forbidden':
      return 'refused';
    case 'bad_request':
      return 'bad_url';
    case 'upstream_timeout':
      return err.code === 'extract_timeout' ? 'extract_timeout' : 'timeout';
    case 'payload_too_large':
      return 'too_large';
    case 'unsupported_media_type':
      return 'unsupported';
    default:
      return 'error';
  }
}
