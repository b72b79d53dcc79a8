/**
 * A processor turns one URL into its text chunks, in order. The fan-out stage has two: in
 * process (content fetcher + chunker resources) and over HTTP (an embedding-style
 * `POST /v1/process` endpoint that answers `{chunks: {"0": text, ...}, error}`).
 */
import type { GatewayState } from '../../runtime/index.ts';
export interface UrlProcessor {
  /** Chunks of the page at `url`; throws when the page could not be processed. */
  chunks(url: string, context: ProcessContext): Promise<string[]>;
}

export interface ProcessContext {
  signal: AbortSignal;
  /** Passed on to HTTP processors so their logs and traces join the request's. */
  requestId: string;
  traceparent?: string;
  /** The request's trace (ctx.state.trace): timed and traced as upstream calls. */
  trace?: GatewayState['trace'];
}
