/**
 * The `web-search` resource's contract (a meta-search backend), and where the `web-search` stage
 * leaves its results for the stages after it.
 */
import type { GatewayState } from '../../runtime/index.ts';

export interface SearchHit {
  url: string;
  title: string;
  /** The snippet the backend shows under the title. */
  content: string;
  /** Engines that returned it, when the backend says. */
  engines: string[];
  score?: number;
}

export interface SearchOptions {
  signal?: AbortSignal;
  /** The request's trace (`ctx.state.trace`): the backend call becomes its client span. */
  trace?: GatewayState['trace'];
}

export interface WebSearch {
  /**
   * Results of one query, best first, as the backend ranks them. Throws a GatewayError
   * (`upstream_error`, `upstream_timeout`) when the backend cannot be reached or answers
   * something that is not a result list.
   */
  search(query: string, options?: SearchOptions): Promise<SearchHit[]>;
}

declare module '../../runtime/index.ts' {
  interface GatewayState {
    /** Results of the `web-search` stage, best first. */
    searchResults?: SearchHit[];
  }
}
