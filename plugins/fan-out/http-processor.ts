/**
 * The HTTP processor: `POST <path>` on an upstream with `{url, config}`, as the embedding
 * service's /v1/process takes it, reading `chunks` (a map from "0", "1"... to text) from the
 * answer. A page counts as failed when the answer is not 200, is not JSON, sets `error` (the
 * embedding service answers 200 with `error: "Failed to scrape content"`), or has no `chunks`.
 */
import type { Readable } from 'node:stream';
import type { HttpUpstream } from '../../runtime/index.ts';
import type { UrlProcessor } from './processor.ts';

async function readCapped(body: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new Error(`the processor's answer is larger than ${limit} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, size);
}

/** The chunk texts of a `{"0": text, "1": text}` map (or a plain list), in index order. */
export function orderedChunks(chunks: unknown): string[] {
  if (Array.isArray(chunks)) return chunks.filter((c): c is string => typeof c === 'string');
  if (chunks === null || typeof chunks !== 'object') throw new Error('the answer has no "chunks" map');
  return Object.entries(chunks as Record<string, unknown>)
    .filter((e): e is [string, string] => /^\d+$/.test(e[0]) && typeof e[1] === 'string')
    .sort((a, b) => Number(a[0]) - Number(b[0]))
    .map(([, text]) => text);
}

export function httpProcessor(
  upstream: HttpUpstream,
  path: string,
  config: Record<string, unknown>,
  maxBytes: number,
): UrlProcessor {
  return {
    async chunks(url, { signal, requestId, traceparent, trace }) {
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json',
        'x-request-id': requestId,
      };
      if (traceparent) headers.traceparent = traceparent;
      const res = await upstream.forward({
        method: 'POST',
        path,
        headers,
        body: JSON.stringify({ url, config }),
        signal,
        trace,
      });
      const raw = await readCapped(res.body, maxBytes);
      if (res.status !== 200) throw new Error(`the processor answered ${res.status}`);
      const answer = JSON.parse(raw.toString('utf8')) as { chunks?: unknown; error?: unknown };
      if (answer.error !== null && answer.error !== undefined)
        throw new Error(`the processor says: ${String(answer.error)}`);
      return orderedChunks(answer.chunks);
    },
  };
}
