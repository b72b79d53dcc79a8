/**
 * The web-search resource and stage against the fixture SearXNG (its real JSON shape), through a
 * real http upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebSearch } from '../../plugins/web-search/api.ts';
import webSearch from '../../plugins/web-search/index.ts';
import { parseSearxng } from '../../plugins/web-search/searxng.ts';
import { plainDialect } from '../../runtime/dialects.ts';
import {
  type GatewayContext,
  GatewayError,
  type HttpUpstream,
  type PluginDefinition,
  type ResourceDefinition,
  type Stage,
} from '../../runtime/index.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import { type SearxngFixture, startSearxng } from '../fixtures/searxng/searxng.ts';
import { type StageServer, serveStages } from '../helpers/stage-harness.ts';

const [resourceDef, stageDef] = webSearch as unknown as [
  ResourceDefinition<Record<string, unknown>, WebSearch>,
  PluginDefinition<Record<string, unknown>>,
];

let searx: SearxngFixture;
let upstream: HttpUpstream;
let dead: HttpUpstream;
const servers: StageServer[] = [];
const results = ['https://example.org/a', 'https://example.org/b?x=1', 'https://example.com/c'];

async function resource(options: Record<string, unknown> = {}, up = upstream): Promise<WebSearch> {
  const env = createTestEnv({ upstreams: { searxng: up } });
  return (await resourceDef.create({ upstream: 'searxng', ...options }, env)).value;
}

async function failure(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }
  throw new Error('expected a failure');
}

beforeAll(async () => {
  searx = await startSearxng(() => results);
  const deps = { logger: silentLogger, configDir: '.' };
  upstream = createUpstream('searxng', { kind: 'http', url: searx.url }, deps) as HttpUpstream;
  dead = createUpstream('searxng', { kind: 'http', url: 'http://127.0.0.1:1' }, deps) as HttpUpstream;
});
afterAll(async () => {
  for (const s of servers) s.close();
  await Promise.all([upstream?.close(), dead?.close(), searx?.close()]);
});

describe('SearXNG answers', () => {
  it('reads results in rank order, skipping entries without a URL', () => {
    const hits = parseSearxng({
      query: 'q',
      number_of_results: 0,
      results: [
        {
          url: 'https://a.example/',
          title: 'A',
          content: 'about a',
          engine: 'brave',
          engines: ['brave', 'ddg'],
          score: 3,
        },
        { title: 'no url' },
        { url: 'https://b.example/', engine: 'google' },
        'not an object',
      ],
      answers: [],
      corrections: [],
      infoboxes: [],
      suggestions: [],
      unresponsive_engines: [['wikidata', 'timeout']],
    });
    expect(hits).toEqual([
      { url: 'https://a.example/', title: 'A', content: 'about a', engines: ['brave', 'ddg'], score: 3 },
      { url: 'https://b.example/', title: '', content: '', engines: ['google'] },
    ]);
  });

  it('refuses an answer without a results list', () => {
    expect(() => parseSearxng({ query: 'q' })).toThrow(/no "results" list/);
    expect(() => parseSearxng([])).toThrow(/no "results" list/);
  });
});

describe('web-search resource', () => {
  it('asks GET /search?q=&format=json with the configured params', async () => {
    const search = await resource({ params: { categories: 'general', language: 'en' } });
    const hits = await search.search('honey bees');
    expect(hits.map((h) => h.url)).toEqual(results);
    expect(hits[0]).toMatchObject({ title: 'Result 1 for the query', engines: ['duckduckgo', 'brave'] });
    expect(searx.queries.at(-1)).toEqual({
      q: 'honey bees',
      params: { categories: 'general', language: 'en', q: 'honey bees', format: 'json' },
    });
  });

  it('reports a failing backend, an unreadable answer, a slow one and an unreachable one', async () => {
    const search = await resource({ timeout_ms: 300 });
    const err500 = await failure(search.search('backend-error'));
    expect(err500).toMatchObject({ kind: 'upstream_error', message: 'Search backend answered 500' });
    const garbage = await failure(search.search('garbage'));
    expect(garbage.kind).toBe('upstream_error');
    expect(garbage.message).toMatch(/^Search backend answered an unreadable result list/);
    const slow = await failure(search.search('slow'));
    expect(slow).toMatchObject({ kind: 'upstream_timeout', message: 'Search backend did not answer within 300 ms' });
    const down = await failure((await resource({}, dead)).search('x'));
    expect(down.kind).toBe('upstream_error');
  });

  it('always asks for JSON, and explains a 403 (JSON not enabled in the SearXNG settings)', async () => {
    const search = await resource({ params: { format: 'html' } });
    expect(await search.search('x')).toHaveLength(3);
    expect(searx.queries.at(-1)?.params.format).toBe('json');
    const err = await failure(search.search('json-disabled'));
    expect(err.message).toBe('Search backend answered 403 (is "json" in search.formats of the SearXNG settings?)');
  });
});

describe('web-search stage', () => {
  async function serve(options: Record<string, unknown>, up = upstream): Promise<string> {
    const env = createTestEnv({ upstreams: { searxng: up } });
    const search = (await resourceDef.create({ upstream: 'searxng', timeout_ms: 300 }, env)).value;
    const stage = (await stageDef.create(
      { search: 'search', ...options },
      createTestEnv({ resources: { search } }),
    )) as Stage;
    const answer: Stage = async (ctx: GatewayContext) => {
      ctx.body = { urls: (ctx.state.searchResults ?? []).map((h) => h.url) };
    };
    const server = await serveStages([stage, answer], { dialect: plainDialect });
    servers.push(server);
    return server.url;
  }

  it('leaves the results on state.searchResults', async () => {
    const url = await serve({});
    const res = await fetch(`${url}/?q=bees`);
    expect(await res.json()).toEqual({ urls: results });
  });

  it('answers 400 for a missing or blank parameter, with the configured wording', async () => {
    const url = await serve({ param: 'query' });
    for (const qs of ['', '?query=', '?query=%20%20', '?q=bees']) {
      const res = await fetch(`${url}/${qs}`);
      expect(res.status).toBe(400);
      expect(await res.json()).toEqual({ error: "Missing query parameter 'query'" });
    }
    const custom = await serve({ missing_message: 'Say what to search for' });
    expect(await (await fetch(custom)).json()).toEqual({ error: 'Say what to search for' });
  });

  it('answers the failure status and message when the backend fails (502 by default)', async () => {
    const byDefault = await serve({});
    const res = await fetch(`${byDefault}/?q=backend-error`);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ error: 'Failed to fetch search results' });
    const seed = await serve({ failure: { status: 500, message: 'Failed to fetch search results' } }, dead);
    const down = await fetch(`${seed}/?q=bees`);
    expect(down.status).toBe(500);
    expect(await down.json()).toEqual({ error: 'Failed to fetch search results' });
  });
});
