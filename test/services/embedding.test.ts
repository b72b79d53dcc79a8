/**
 * The embedding service as shipped (configs/embedding.yaml), started for real: models are tiny
 * BERT-shaped ONNX models generated under the seed's names (dimension overridden to theirs),
 * pages come from a local HTTP server through the real content fetcher (its loopback refusal
 * lifted for that port only) and are split by the real chunker; the /v1/process cache persists
 * to SQLite and survives a restart.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { cosine, generateTinyModel, type TinyModel } from '../fixtures/embed-stages.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

const CONFIG = resolve(import.meta.dirname, '../../configs/embedding.yaml');
const SEED_MODELS =
  'AllMiniLML6V2 AllMiniLML6V2Q AllMiniLML12V2 AllMiniLML12V2Q BGEBaseENV15 BGEBaseENV15Q BGELargeENV15 BGELargeENV15Q BGESmallENV15 BGESmallENV15Q AlphaEmbedTextV1 AlphaEmbedTextV15 AlphaEmbedTextV15Q ParaphraseMLMiniLML12V2 ParaphraseMLMiniLML12V2Q ParaphraseMLMpnetBaseV2 BGESmallZHV15 MultilingualE5Small MultilingualE5Base MultilingualE5Large BetaEmbedLargeV1 BetaEmbedLargeV1Q'.split(
    ' ',
  );

const ARTICLE = `<!DOCTYPE html><html><head><title>Rivers</title></head><body>
<nav>Home | About | Contact</nav>
<article><h1>Rivers</h1>
<p>${'Rivers carry water from the mountains to the sea, shaping valleys and plains along the way. '.repeat(6)}</p>
<p>${'Many cities were founded on river banks because rivers provided water, food and transport. '.repeat(6)}</p>
</article><footer>Copyright</footer></body></html>`;

let dir: string;
let bge: TinyModel;
let pages: Server;
let pagesUrl: string;
const pageHits: string[] = [];
let svc: StartedService;

async function start(): Promise<StartedService> {
  return startService(CONFIG, {
    env: {
      EMBED_MODELS_DIR: join(dir, 'models'),
      EMBED_FETCH_ALLOW: new URL(pagesUrl).host,
      EMBED_CACHE_PERSIST: join(dir, 'process-cache.db'),
      EMBED_POOL_SIZE: '1',
    },
    set: ['resources.models.models={BGESmallENV15: {dimension: 32}, AllMiniLML6V2: {dimension: 32}}'],
  });
}

const post = (path: string, body: unknown) =>
  fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'embedding-service-'));
  bge = generateTinyModel(join(dir, 'models'), 'BGESmallENV15', { seed: 31 });
  generateTinyModel(join(dir, 'models'), 'AllMiniLML6V2', { seed: 32 });
  pages = createServer((req, res) => {
    pageHits.push(req.url ?? '');
    if (req.url === '/rivers.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(ARTICLE);
    } else if (req.url === '/notes.txt') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('one two three four five six seven');
    } else {
      res.writeHead(404);
      res.end('not here');
    }
  });
  pagesUrl = await listenLocal(pages);
  svc = await start();
});

afterAll(async () => {
  await svc?.close();
  if (pages) closeNow(pages);
  rmSync(dir, { recursive: true, force: true });
});

describe('embedding service', () => {
  it('GET /v1/params: the seed’s chunking types and all 22 models, installed or not', async () => {
    const res = await fetch(`${svc.url}/v1/params`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      chunking_types: ['words', 'llm-concept', 'llm-introspection'],
      embedding_models: SEED_MODELS,
    });
  });

  it('POST /v1/embed: one vector per text, in order, equal to the reference forward pass', async () => {
    const texts = ['Rivers carry water.', 'Cities grew on river banks, where water and food were at hand.', 'ok'];
    const res = await post('/v1/embed', { text: texts });
    expect(res.status).toBe(200);
    const vectors = (await res.json()) as number[][];
    expect(vectors).toHaveLength(3);
    texts.forEach((text, i) => {
      expect(cosine(vectors[i], bge.reference.embed(bge.ids(text), 'cls'))).toBeGreaterThanOrEqual(0.99999);
    });
    // Another installed model, by config.
    const mini = await post('/v1/embed', { text: texts, config: { embedding_model: 'AllMiniLML6V2' } });
    expect(mini.status).toBe(200);
    expect(((await mini.json()) as number[][])[0]).toHaveLength(32);
  });

  it('errors are {error} with the seed’s messages', async () => {
    const cases: Array<[unknown, number, string]> = [
      [
        { text: ['a'], config: { embedding_model: 'TextEmbedding3' } },
        400,
        'Unsupported embedding model: TextEmbedding3',
      ],
      [{ text: ['a'], config: { chunking_type: 'paragraphs' } }, 400, 'Unsupported chunking type: paragraphs'],
      [
        { text: ['a'], config: { chunk_size: 5 } },
        400,
        'Unknown config field: chunk_size (allowed: chunking_type, chunking_size, embedding_model)',
      ],
      [{ text: 'a' }, 400, 'text must be an array of strings'],
      [{ text: [''] }, 400, 'text[0] is empty'],
    ];
    for (const [body, status, error] of cases) {
      const res = await post('/v1/embed', body);
      expect(res.status).toBe(status);
      expect(await res.json()).toEqual({ error });
    }
    const absent = await post('/v1/embed', { text: ['a'], config: { embedding_model: 'MultilingualE5Large' } });
    expect(absent.status).toBe(503);
    const { error } = (await absent.json()) as { error: string };
    expect(error).toBe(
      `Embedding model MultilingualE5Large is not installed: put model.onnx, model.onnx_data, tokenizer.json ` +
        `(from the Hugging Face repository Qdrant/multilingual-e5-large-onnx) in ${join(dir, 'models', 'MultilingualE5Large')}; ` +
        `run: npx tsx scripts/models/download-embedding.ts MultilingualE5Large --dir ${join(dir, 'models')}`,
    );
  });

  it('a 10 MB text is refused with 413 {error}, and the service goes on', async () => {
    const res = await post('/v1/embed', { text: ['x'.repeat(10 * 1024 * 1024)] });
    expect(res.status).toBe(413);
    expect(Object.keys((await res.json()) as object)).toEqual(['error']);
    expect((await post('/v1/embed', { text: ['still here'] })).status).toBe(200);
  });

  it('POST /v1/process: page → chunks → embeddings; cached (X-Cache); the cache survives a restart', async () => {
    const url = `${pagesUrl}/rivers.html`;
    const config = { chunking_type: 'words', chunking_size: 40 };
    const first = await post('/v1/process', { url, config });
    expect(first.status).toBe(200);
    expect(first.headers.get('x-cache')).toBe('MISS');
    const result = (await first.json()) as {
      url: string;
      config: object;
      chunks: Record<string, string>;
      embeddings: Record<string, number[]>;
      error: string | null;
    };
    expect(result.url).toBe(url);
    expect(result.config).toEqual({ ...config, embedding_model: 'BGESmallENV15' });
    expect(result.error).toBeNull();
    const keys = Object.keys(result.chunks);
    expect(keys.length).toBeGreaterThanOrEqual(2);
    expect(keys).toEqual(keys.map((_, i) => String(i)));
    expect(Object.keys(result.embeddings)).toEqual(keys);
    expect(Object.values(result.chunks).join(' ')).toContain('Rivers carry water from the mountains');
    for (const key of keys) {
      expect(result.chunks[key].split(/\s+/).length).toBeLessThanOrEqual(40);
      const expected = bge.reference.embed(bge.ids(result.chunks[key]), 'cls');
      expect(cosine(result.embeddings[key], expected)).toBeGreaterThanOrEqual(0.99999);
    }
    const hits = pageHits.length;

    const second = await post('/v1/process', { url, config });
    expect(second.headers.get('x-cache')).toBe('HIT');
    expect(await second.json()).toEqual(result);
    expect(pageHits.length).toBe(hits);

    await svc.close();
    svc = await start();
    const afterRestart = await post('/v1/process', { url, config });
    expect(afterRestart.headers.get('x-cache')).toBe('HIT');
    expect(await afterRestart.json()).toEqual(result);
    expect(pageHits.length).toBe(hits);
  });

  it('a page that cannot be fetched: 200, error "Failed to scrape content", empty maps', async () => {
    for (const url of [`${pagesUrl}/missing.html`, 'http://127.0.0.1:1/', 'http://10.255.255.1/private']) {
      const res = await post('/v1/process', { url });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-cache')).toBe('MISS');
      expect(await res.json()).toEqual({
        url,
        config: { chunking_type: 'words', chunking_size: 512, embedding_model: 'BGESmallENV15' },
        chunks: {},
        embeddings: {},
        error: 'Failed to scrape content',
      });
    }
  });

  it('POST /v1/process refuses what is not an http(s) URL', async () => {
    const res = await post('/v1/process', { url: 'gopher://example.org/' });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'url must be an http or https URL' });
  });

  it('OpenAPI description, Swagger UI, readiness and metrics', async () => {
    const doc = (await (await fetch(`${svc.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, unknown>>;
      components: { schemas: Record<string, { properties?: Record<string, { enum?: string[] }> }> };
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/embed', '/v1/process', '/v1/params']));
    expect(doc.components.schemas.Config.properties?.embedding_model.enum).toEqual(SEED_MODELS);
    expect(doc.components.schemas.Config.properties?.chunking_type.enum).toEqual([
      'words',
      'llm-concept',
      'llm-introspection',
    ]);

    const page = await fetch(`${svc.url}/docs`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('swagger-ui-bundle.js');
    const asset = await fetch(`${svc.url}/docs/swagger-ui-bundle.js`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get('content-type')).toContain('javascript');

    const ready = await fetch(`${svc.url}/ready`);
    expect(ready.status).toBe(200);

    expect((await post('/v1/embed', { text: ['counted'] })).status).toBe(200);
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_embed_texts_total\{[^}]*model="BGESmallENV15"[^}]*\} \d+/);
    expect(metrics).toContain('switchyard_embed_process_cache_total');
  });
});
