import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { paragraphsAnswer } from '../fixtures/ai-client/chunk-replies.ts';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';

const stages = fileURLToPath(new URL('../fixtures/ai-client/chunk-stages.ts', import.meta.url));

// The resource as a service file declares it: the model's address and key from the environment.
const yaml = `
service: chunk-demo
listen: { port: 0 }
metrics: { port: 0 }
dialect: plain
plugins: [${JSON.stringify(stages)}]
resources:
  chunker:
    type: chunker
    llm:
      provider: local
      base_url: \${CHUNK_LLM_BASE_URL:-http://localhost:11434/v1}
      model: \${CHUNK_LLM_MODEL:-llama3.2}
      api_key: \${CHUNK_LLM_API_KEY}
routes:
  - match: { method: POST, path: /chunk }
    pipeline:
      - test-chunk: { chunker: chunker }
`;

describe('the chunker resource in a running service', () => {
  let backend: OpenAiBackend;
  let svc: StartedService;
  beforeAll(async () => {
    backend = await startOpenAiBackend({ apiKey: 'sk-from-env', reply: paragraphsAnswer });
    const file = join(mkdtempSync(join(tmpdir(), 'chunk-')), 'chunk.yaml');
    writeFileSync(file, yaml);
    svc = await startService(file, {
      env: { CHUNK_LLM_BASE_URL: backend.url, CHUNK_LLM_MODEL: 'gpt-4o-mini', CHUNK_LLM_API_KEY: 'sk-from-env' },
    });
  });
  afterAll(async () => {
    await svc?.close();
    await backend?.close();
  });

  const post = (body: unknown) =>
    fetch(`${svc.url}/chunk`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });

  it('chunks by words with the schema defaults applied', async () => {
    const res = await post({ text: 'a b c d e', type: 'words', size: 2 });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({
      types: ['words', 'llm-concept', 'llm-introspection'],
      chunks: ['a b', 'c d', 'e'],
    });
  });

  it('reaches the model configured through the environment', async () => {
    const res = await post({ text: 'One idea here.\n\nAnother idea there.', type: 'llm-concept', size: 50 });
    expect(await res.json()).toMatchObject({ chunks: ['One idea here.', 'Another idea there.'] });
    expect(backend.requests.at(-1)?.headers.authorization).toBe('Bearer sk-from-env');
    expect(backend.requests.at(-1)?.body.model).toBe('gpt-4o-mini');
  });

  it('an unknown type is a 400 with the seed message', async () => {
    const res = await post({ text: 'a b', type: 'sentences', size: 2 });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'Unsupported chunking type: sentences' });
  });

  it('exposes the fallback counter on the metrics listener', async () => {
    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(text).toContain('# TYPE switchyard_chunk_fallbacks_total counter');
  });
});
