/**
 * A SearXNG-compatible JSON search API: `GET <path>?q=<query>&format=json` answers
 * `{query, number_of_results, results: [{url, title, content, engine, engines, positions, score,
 * category, parsed_url, ...}], answers, corrections, infoboxes, suggestions, unresponsive_engines}`.
 * Only `results` matters here; entries without a string `url` are skipped. The order is the
 * backend's ranking (SearXNG sorts by its merged score).
 */
import type { SearchHit } from './api.ts';

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const text = (v: unknown): string => (typeof v === 'string' ? v : '');

/** The hits of a SearXNG answer; throws when the answer has no `results` list. */
export function parseSearxng(answer: unknown): SearchHit[] {
  if (!isObject(answer) || !Array.isArray(answer.results)) {
    throw new Error('the answer has no "results" list');
  }
  const hits: SearchHit[] = [];
  for (const r of answer.results) {
    if (!isObject(r) || typeof r.url !== 'string' || r.url === '') continue;
    const engines = Array.isArray(r.engines) ? r.engines.filter((e): e is string => typeof e === 'string') : [];
    if (engines.length === 0 && typeof r.engine === 'string') engines.push(r.engine);
    hits.push({
      url: r.url,
      title: text(r.title),
      content: text(r.content),
      engines,
      ...(typeof r.score === 'number' ? { score: r.score } : {}),
    });
  }
  return hits;
}
