/**
 * Property: whatever body is sent to the embedding service's POST routes, the answer is a
 * documented status with an `{error: string}` body (or a 200 of the right shape): never a 500,
 * never a dropped connection. URLs are kept off the network: local pages, or strings that are
 * not http(s) URLs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { generateTinyModel } from '../fixtures/embed-stages.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

let dir: string;
let pages: Server;
let pagesUrl: string;
let svc: StartedService;

const models = ['BGESmallENV15', 'AllMiniLML6V2', 'BGELargeENV15Q', 'Nope', ''];
const config = fc.oneof(
  fc.record(
    {
      chunking_type: fc.oneof(fc.constantFrom('words', 'llm-concept', 'paragraphs'), fc.anything()),
      chunking_size: fc.oneof(fc.integer({ min: -5, max: 200_000 }), fc.double(), fc.anything()),
      embedding_model: fc.oneof(fc.constantFrom(...models), fc.anything()),
      extra: fc.anything(),
    },
    { requiredKeys: [] },
  ),
  fc.anything(),
);
const texts = fc.oneof(
  fc.array(fc.oneof(fc.string({ maxLength: 300 }), fc.string({ maxLength: 50, unit: 'grapheme' })), { maxLength: 40 }),
  fc.array(fc.anything(), { maxLength: 5 }),
  fc.anything(),
);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'embedding-fuzz-'));
  generateTinyModel(join(dir, 'models'), 'BGESmallENV15', { seed: 51, layers: 1 });
  pages = createServer((req, res) => {
    res.writeHead(req.url === '/page.txt' ? 200 : 404, { 'content-type': 'text/plain' });
    res.end(req.url === '/page.txt' ? 'a small page of plain text for the fuzzer' : 'no');
  });
  pagesUrl = await listenLocal(pages);
  svc = await startService(resolve(import.meta.dirname, '../../configs/embedding.yaml'), {
    env: { EMBED_MODELS_DIR: join(dir, 'models'), EMBED_FETCH_ALLOW: new URL(pagesUrl).host, EMBED_POOL_SIZE: '1' },
    // The LLM chunking types fall back to words at once: nothing listens on port 1.
    set: [
      'resources.models.models={BGESmallENV15: {dimension: 32}}',
      'resources.chunker.llm.base_url=http://127.0.0.1:1/v1',
    ],
  });
});

afterAll(async () => {
  await svc?.close();
  if (pages) closeNow(pages);
  rmSync(dir, { recursive: true, force: true });
});

async function send(path: string, body: string): Promise<{ status: number; json: unknown }> {
  const res = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await res.text();
  return { status: res.status, json: JSON.parse(text) };
}

function expectDocumented(status: number, json: unknown, ok: (json: unknown) => boolean): void {
  expect([200, 400, 413, 503]).toContain(status);
  if (status === 200) expect(ok(json)).toBe(true);
  else {
    expect(Object.keys(json as object)).toEqual(['error']);
    expect(typeof (json as { error: unknown }).error).toBe('string');
  }
}

describe('bad input never gets an undocumented status', () => {
  it('POST /v1/embed', { timeout: 120_000 }, async () => {
    const body = fc.oneof(
      fc
        .record(
          { text: texts, config, input_type: fc.oneof(fc.constantFrom('query', 'passage'), fc.anything()) },
          {
            requiredKeys: [],
          },
        )
        .map((o) => JSON.stringify(o)),
      fc.json({ maxDepth: 6 }),
      fc.string({ maxLength: 100 }),
    );
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const { status, json } = await send('/v1/embed', b);
        expectDocumented(status, json, (v) => Array.isArray(v) && v.every((row) => Array.isArray(row)));
      }),
      { numRuns: 150 },
    );
  });

  it('POST /v1/process', { timeout: 120_000 }, async () => {
    const url = fc.oneof(
      fc.constantFrom(`${pagesUrl}/page.txt`, `${pagesUrl}/missing`, 'ftp://x/', 'javascript:alert(1)', ''),
      fc.string({ maxLength: 60 }).filter((s) => !/^\s*https?:/i.test(s)),
      fc.anything().filter((v) => typeof v !== 'string'),
    );
    const body = fc.oneof(
      fc.record({ url, config, more: fc.anything() }, { requiredKeys: ['url'] }).map((o) => JSON.stringify(o)),
      fc.json({ maxDepth: 4 }).filter((s) => !/https?:/i.test(s)),
    );
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const { status, json } = await send('/v1/process', b);
        expectDocumented(status, json, (v) => {
          const r = v as Record<string, unknown>;
          return (
            typeof r.url === 'string' &&
            typeof r.chunks === 'object' &&
            (r.error === null || typeof r.error === 'string')
          );
        });
      }),
      { numRuns: 150 },
    );
  });
});
