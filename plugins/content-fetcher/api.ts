/**
 * The `content-fetcher` resource's contract, for stages and resources that read web pages as text
 * (the embedding service's /v1/process, the search service's in-process fan-out).
 */

export interface FetchedContent {
  /** The URL the text came from, after redirects. */
  url: string;
  /** HTML reduced to its main text (title first, one paragraph per line block), or text/plain as sent. */
  text: string;
  /** Media type of the page, lower case, without parameters: `text/html`, `text/plain`... */
  contentType: string;
}

export interface FetchTextOptions {
  /** Cancels the fetch (a client gone, a caller's deadline). A `TimeoutError` reason is reported as a timeout. */
  signal?: AbortSignal;
}

export interface ContentFetcher {
  /**
   * Fetches a page and returns its text. Throws a GatewayError:
   * `bad_request` (not an absolute http(s) URL), `forbidden` (a private, loopback or reserved
   * address that is not allow-listed, at any redirect hop), `upstream_error` (DNS failure,
   * connection failure, a non-2xx answer, too many redirects), `upstream_timeout` (connect, read or
   * total time exceeded), `payload_too_large` (the page is over the size cap),
   * `unsupported_media_type` (neither HTML nor plain text).
   */
  fetchText(url: string, options?: FetchTextOptions): Promise<FetchedContent>;
}

/** A page's URL as callers may log it: no query string, fragment or credentials (loggable-url.ts). */
export { loggableUrl } from './loggable-url.ts';
