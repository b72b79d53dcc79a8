/**
 * The in-process processor: the `content-fetcher` resource reads the page as text, the `chunker`
 * resource splits it. Nothing is embedded, so nothing is computed only to be thrown away.
 */
import type { Chunker } from '../chunker/api.ts';
import type { ContentFetcher } from '../content-fetcher/api.ts';
import type { UrlProcessor } from './processor.ts';

export function localProcessor(fetcher: ContentFetcher, chunker: Chunker, type: string, size: number): UrlProcessor {
  return {
    async chunks(url, { signal }) {
      const page = await fetcher.fetchText(url, { signal });
      return chunker.chunk(page.text, { type, size });
    },
  };
}
