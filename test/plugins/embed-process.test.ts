/**
 * The `embed-process` and `embed` stages behind a real HTTP server (plain dialect), composed with
 * stand-in fetcher and chunker resources (test/fixtures/embed-stages.ts) that count their calls
 * and fail on demand, and a real `embedding-models` resource on a generated tiny model.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingModels } from '../../plugins/embed/api.ts';
import embedStage from '../../plugins/embed/embed-stage.ts';
import modelsResource from '../../plugins/embed/models-resource.ts';
import processStage from '../../plugins/embed/process-stage.ts';
import { plainDialect } from '../../runtime/dialects.ts';
import type { ResourceInstance, StageInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import {
  cosine,
  type FixtureChunker,
  type FixtureFetcher,
  fixtureChunker,
  fixtureFetcher,
  generateTinyModel,
  type TinyModel,
} from '../fixtures/embed-stages.ts';
import { type StageServer, serveStages } from '../helpers/stage-harness.ts';

const PAGE = Array.from({ length: 25 }, (_, i) => `word${i}`).join(' ');
const SLOW = 'http://slow.test/';

let dir: string;
let model: TinyModel;
let models: ResourceInstance<EmbeddingModels>;
let fetcher: FixtureFetcher;
let chunker: FixtureChunker;
const stages: StageInstance[] = [];
let processServer: StageServer;
let embedServer: StageServer;
let impatientServer: StageServer;

async function stage(
  plugin: typeof processStage | typeof embedStage,
  options: Record<string, unknown>,
): Promise<StageInstance> {
  const env = createTestEnv({
    configDir: dir,
    resources: { models: models.value, fetcher, chunker },
  });
  const instance = (await plugin.create(options as never, env)) as StageInstance;
  stages.push(instance);
  return instance;
}

const post = (server: StageServer, path: string, body: unknown) =>
  fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'embed-process-'));
  model = generateTinyModel(dir, 'BGESmallENV15', { seed: 21 });
  models = (await modelsResource.create(
    { models_dir: dir, models: { BGESmallENV15: { dimension: 32 } } } as never,
    createTestEnv({ configDir: dir }),
  )) as ResourceInstance<EmbeddingModels>;
  fetcher = fixtureFetcher({ 'http://pages.test/a': PAGE, [SLOW]: 'slow page text' }, { [SLOW]: 300 });
  chunker = fixtureChunker();
  const process = await stage(processStage, { chunker: 'chunker', fetcher: 'fetcher', max_chunks: 20 });
  processServer = await serveStages([process.handle], { dialect: plainDialect });
  const impatient = await stage(processStage, { fetch_timeout_ms: 50 });
  impatientServer = await serveStages([impatient.handle], { dialect: plainDialect });
  const embed = await stage(embedStage, {
    chunker: 'chunker',
    max_texts: 5,
    max_text_chars: 1000,
    max_total_chars: 3000,
  });
  embedServer = await serveStages([embed.handle], { dialect: plainDialect });
});

afterAll(async () => {
  processServer?.close();
  embedServer?.close();
  impatientServer?.close();
  for (const s of stages) await s.close?.();
  await models?.close?.();
  rmSync(dir, { recursive: true, force: true });
});

describe('embed-process', () => {
  it('fetches, chunks, embeds; the second identical request is served from the cache', async () => {
    const config = { chunking_type: 'words', chunking_size: 10 };
    const first = await post(processServer, '/v1/process', { url: 'http://pages.test/a', config });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    const body = (await first.json()) as {
      url: string;
      config: Record<string, unknown>;
      chunks: Record<string, string>;
      embeddings: Record<string, number[]>;
      error: null;
    };
    expect(body.url).toBe('http://pages.test/a');
    expect(body.config).toEqual({ chunking_type: 'words', chunking_size: 10, embedding_model: 'BGESmallENV15' });
    expect(body.error).toBeNull();
    expect(Object.keys(body.chunks)).toEqual(['0', '1', '2']);
    expect(body.chunks['2']).toBe('word20 word21 word22 word23 word24');
    expect(Object.keys(body.embeddings)).toEqual(['0', '1', '2']);
    for (const [i, chunk] of Object.entries(body.chunks)) {
      const expected = model.reference.embed(model.ids(chunk), 'cls');
      expect(cosine(body.embeddings[i], expected)).toBeGreaterThanOrEqual(0.99999);
    }
    const calls = fetcher.calls.length;

    const second = await post(processServer, '/v1/process', { url: 'http://pages.test/a', config });
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(await second.json()).toEqual(body);
    expect(fetcher.calls.length).toBe(calls);

    // The key is the resolved config: spelling the defaults out is the same request...
    const spelled = await post(processServer, '/v1/process', {
      url: 'http://pages.test/a',
      config: { ...config, embedding_model: 'BGESmallENV15' },
    });
    expect(spelled.headers.get('x-cache')).toBe('HIT');
    // ...another size is not.
    const other = await post(processServer, '/v1/process', {
      url: 'http://pages.test/a',
      config: { chunking_size: 5 },
    });
    expect(other.headers.get('x-cache')).toBe('MISS');
    expect(Object.keys(((await other.json()) as { chunks: object }).chunks)).toHaveLength(5);
  });

  it('a failed fetch is 200 with error "Failed to scrape content" and empty maps, and is not cached', async () => {
    for (const expected of ['MISS', 'MISS']) {
      const res = await post(processServer, '/v1/process', { url: 'http://pages.test/missing' });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-cache')).toBe(expected);
      expect(await res.json()).toEqual({
        url: 'http://pages.test/missing',
        config: { chunking_type: 'words', chunking_size: 512, embedding_model: 'BGESmallENV15' },
        chunks: {},
        embeddings: {},
        error: 'Failed to scrape content',
      });
    }
  });

  it('a fetch that outlasts fetch_timeout_ms is a failed fetch', async () => {
    const res = await post(impatientServer, '/v1/process', { url: SLOW });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { error: string }).error).toBe('Failed to scrape content');
  });

  it('identical requests that arrive together are computed once', async () => {
    const before = fetcher.calls.filter((u) => u === SLOW).length;
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => post(processServer, '/v1/process', { url: SLOW })),
    );
    const bodies = await Promise.all(answers.map((r) => r.text()));
    expect(new Set(bodies).size).toBe(1);
    expect(answers.map((r) => r.headers.get('x-cache'))).toEqual(['MISS', 'MISS', 'MISS', 'MISS', 'MISS']);
    expect(fetcher.calls.filter((u) => u === SLOW).length - before).toBe(1);
  });

  it('an unsupported model or chunking type: the seed’s 400 messages', async () => {
    const model = await post(processServer, '/v1/process', {
      url: 'http://pages.test/a',
      config: { embedding_model: 'Word2Vec' },
    });
    expect(model.status).toBe(400);
    expect(await model.json()).toEqual({ error: 'Unsupported embedding model: Word2Vec' });
    const type = await post(processServer, '/v1/process', {
      url: 'http://pages.test/a',
      config: { chunking_type: 'sentences' },
    });
    expect(type.status).toBe(400);
    expect(await type.json()).toEqual({ error: 'Unsupported chunking type: sentences' });
  });

  it('a chunker that fails inside: 500 carrying the error message', async () => {
    const res = await post(processServer, '/v1/process', {
      url: 'http://pages.test/a',
      config: { chunking_type: 'broken' },
    });
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: 'Chunking failed: the chunking model said no' });
  });

  it('a page that gives more chunks than max_chunks: 400 with a hint', async () => {
    const res = await post(processServer, '/v1/process', { url: 'http://pages.test/a', config: { chunking_size: 1 } });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({
      error: 'The page gives 25 chunks of 1 words; the limit is 20: use a larger chunking_size',
    });
  });

  it('bad bodies: 400 with what to change', async () => {
    const cases: Array<[unknown, string]> = [
      [{}, 'url is required'],
      [{ url: 42 }, 'url must be a string'],
      [{ url: 'not a url' }, 'url is not a valid URL: not a url'],
      [{ url: 'file:///etc/passwd' }, 'url must be an http or https URL'],
      [{ url: 'http://pages.test/a', extra: 1 }, 'Unknown request field: extra (allowed: url, config)'],
      [{ url: 'http://pages.test/a', config: [] }, 'config must be an object'],
      [
        { url: 'http://pages.test/a', config: { chunking_size: 0 } },
        'config.chunking_size must be an integer from 1 to 100000 (words per chunk)',
      ],
      [
        { url: 'http://pages.test/a', config: { chunking_size: '5' } },
        'config.chunking_size must be an integer from 1 to 100000 (words per chunk)',
      ],
      [{ url: 'http://pages.test/a', config: { embedding_model: 5 } }, 'config.embedding_model must be a string'],
      [
        { url: 'http://pages.test/a', config: { size: 5, model: 'x' } },
        'Unknown config fields: size, model (allowed: chunking_type, chunking_size, embedding_model)',
      ],
    ];
    for (const [body, error] of cases) {
      const res = await post(processServer, '/v1/process', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(await res.json()).toEqual({ error });
    }
    const invalid = await post(processServer, '/v1/process', '{"url": ');
    expect(invalid.status).toBe(400);
    expect(Object.keys((await invalid.json()) as object)).toEqual(['error']);
  });
});

describe('embed', () => {
  it('one vector per text, in order; input_type query is accepted', async () => {
    const texts = ['first text', 'the second, longer text of the two', 'x'];
    const res = await post(embedServer, '/v1/embed', { text: texts });
    expect(res.status).toBe(200);
    const vectors = (await res.json()) as number[][];
    texts.forEach((text, i) => {
      expect(cosine(vectors[i], model.reference.embed(model.ids(text), 'cls'))).toBeGreaterThanOrEqual(0.99999);
    });
    const query = await post(embedServer, '/v1/embed', { text: texts, input_type: 'query' });
    expect(await query.json()).toEqual(vectors); // BGE has no query prefix in its card
    expect(await (await post(embedServer, '/v1/embed', { text: [] })).json()).toEqual([]);
  });

  it('limits and bad input: clear 4xx, never 500', async () => {
    const cases: Array<[unknown, number, string]> = [
      [{}, 400, 'text is required: an array of strings'],
      [{ text: 'hello' }, 400, 'text must be an array of strings'],
      [{ text: ['a', 3] }, 400, 'text[1] must be a string'],
      [{ text: ['a', ''] }, 400, 'text[1] is empty'],
      [{ text: ['  \n'] }, 400, 'text[0] is empty'],
      [{ text: ['a', 'b', 'c', 'd', 'e', 'f'] }, 413, 'text has 6 items; the limit (max_texts) is 5 per request'],
      [
        { text: ['y'.repeat(1001)] },
        413,
        "text[0] has 1001 characters; the limit (max_text_chars) is 1000 per text (texts are truncated to the model's token limit anyway)",
      ],
      [
        { text: Array.from({ length: 4 }, () => 'z'.repeat(900)) },
        413,
        'text has 3600 characters in all; the limit (max_total_chars) is 3000 per request',
      ],
      [{ text: ['a'], input_type: 'document' }, 400, 'input_type must be "query" or "passage"'],
      [{ text: ['a'], config: { embedding_model: 'Nope' } }, 400, 'Unsupported embedding model: Nope'],
      [{ text: ['a'], config: { chunking_type: 'Nope' } }, 400, 'Unsupported chunking type: Nope'],
      [
        { text: ['a'], config: { embedding_model: 'AllMiniLML6V2' } },
        503,
        'Embedding model AllMiniLML6V2 is not installed',
      ],
      [[1, 2], 400, ''],
    ];
    for (const [body, status, error] of cases) {
      const res = await post(embedServer, '/v1/embed', body);
      expect(res.status, JSON.stringify(body)).toBe(status);
      const answer = (await res.json()) as { error: string };
      expect(Object.keys(answer)).toEqual(['error']);
      expect(answer.error).toContain(error);
    }
  });
});
