/**
 * The OpenAI-compatible fixture backend speaks the real wire format: the official `openai` SDK,
 * pointed straight at it, gets chat completions (plain and streamed), legacy completions,
 * embeddings (float and base64) and its own error classes for the fixture's error answers.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cannedAnswer, embed, type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';

const apiKey = 'sk-fixture-test-0001';
let backend: OpenAiBackend;
let client: OpenAI;

beforeAll(async () => {
  backend = await startOpenAiBackend({
    apiKey,
    chunkSize: 5,
    embeddingDimensions: 8,
    reply: (request) => {
      const last = request.body.messages?.at(-1)?.content ?? request.body.prompt;
      return `You said: ${last}`;
    },
  });
  // No retries: an error answer must reach the test as it came.
  client = new OpenAI({ apiKey, baseURL: backend.url, maxRetries: 0 });
});

afterAll(() => backend?.close());

describe('OpenAI fixture backend, through the official SDK', () => {
  it('answers a chat completion and records the request', async () => {
    const before = backend.requests.length;
    const completion = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'hello there' }],
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.choices[0].message).toMatchObject({ role: 'assistant', content: 'You said: hello there' });
    expect(completion.choices[0].finish_reason).toBe('stop');
    expect(completion.usage?.total_tokens).toBeGreaterThan(0);
    const recorded = backend.requests[before];
    expect(recorded).toMatchObject({ method: 'POST', path: '/v1/chat/completions' });
    expect(recorded.headers.authorization).toBe(`Bearer ${apiKey}`);
    expect(recorded.body.messages).toEqual([{ role: 'user', content: 'hello there' }]);
  });

  it('streams a chat completion in chunks, role first, finish_reason last, usage on request', async () => {
    const stream = await client.chat.completions.create({
      model: 'gpt-4o-mini',
      messages: [{ role: 'user', content: 'stream me' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('You said: stream me');
    // 19 characters in deltas of 5: 4 content chunks between the role chunk and the final one.
    expect(chunks.length).toBe(1 + 4 + 1 + 1);
    const last = chunks.at(-2)!;
    expect(last.choices[0]).toMatchObject({ delta: {}, finish_reason: 'stop' });
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage?.completion_tokens).toBeGreaterThan(0);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
  });

  it('streams a huge answer lazily, chunk by chunk', async () => {
    const stream = await client.chat.completions.create({
      model: 'huge-16kb',
      messages: [{ role: 'user', content: 'go' }],
      stream: true,
    });
    let length = 0;
    let deltas = 0;
    for await (const chunk of stream) {
      length += chunk.choices[0]?.delta.content?.length ?? 0;
      deltas++;
    }
    expect(length).toBe(16 * 1024);
    expect(deltas).toBe(2 + Math.ceil((16 * 1024) / 5));
  });

  it('answers a legacy completion, plain and streamed', async () => {
    const completion = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'Say hi' });
    expect(completion.object).toBe('text_completion');
    expect(completion.choices[0]).toMatchObject({ text: 'You said: Say hi', index: 0, finish_reason: 'stop' });

    const stream = await client.completions.create({ model: 'gpt-3.5-turbo-instruct', prompt: 'Say hi', stream: true });
    let text = '';
    let finish: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0].text;
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    expect(text).toBe('You said: Say hi');
    expect(finish).toBe('stop');
  });

  it('embeds strings and arrays, deterministically, as floats and as base64', async () => {
    // The SDK asks for base64 by default and decodes it; `float` comes as plain numbers.
    const decoded = await client.embeddings.create({ model: 'text-embedding-3-small', input: ['alpha', 'beta'] });
    const floats = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: ['alpha', 'beta'],
      encoding_format: 'float',
    });
    expect(floats.object).toBe('list');
    expect(floats.data.map((d) => [d.object, d.index])).toEqual([
      ['embedding', 0],
      ['embedding', 1],
    ]);
    expect(decoded.data.map((d) => d.embedding)).toEqual(floats.data.map((d) => d.embedding));
    expect(floats.data[0].embedding).toEqual(Array.from(embed('alpha', 8)));
    expect(floats.data[0].embedding).not.toEqual(floats.data[1].embedding);

    const single = await client.embeddings.create({
      model: 'text-embedding-3-small',
      input: 'alpha',
      encoding_format: 'base64',
      dimensions: 4,
    });
    const raw = single.data[0].embedding as unknown as string;
    const bytes = Buffer.from(raw, 'base64');
    expect(Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, 4))).toEqual(Array.from(embed('alpha', 4)));
  });

  it('lists models', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model.id);
    expect(models).toContain('gpt-4o-mini');
  });

  it('raises the SDK error class matching each error answer', async () => {
    const failure = (call: Promise<unknown>) =>
      call.then(
        () => undefined,
        (err: unknown) => err,
      );
    const chat = (sdk: OpenAI, model: string) =>
      failure(sdk.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }] }));

    const server = await chat(client, 'error-500');
    expect(server).toBeInstanceOf(OpenAI.InternalServerError);
    expect(server).toMatchObject({ status: 500, type: 'server_error' });

    const limited = await chat(client, 'error-429');
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect(limited).toMatchObject({ status: 429, code: 'rate_limit_exceeded' });

    const denied = await chat(new OpenAI({ apiKey: 'sk-wrong', baseURL: backend.url, maxRetries: 0 }), 'gpt-4o-mini');
    expect(denied).toBeInstanceOf(OpenAI.AuthenticationError);
    expect(denied).toMatchObject({ status: 401, code: 'invalid_api_key' });
    expect((denied as Error).message).not.toContain('sk-wrong');

    expect(await failure(client.post('/nowhere', { body: {} }))).toBeInstanceOf(OpenAI.NotFoundError);
    const invalid = await failure(
      client.chat.completions.create({ model: 'gpt-4o-mini' } as OpenAI.ChatCompletionCreateParamsNonStreaming),
    );
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError);
    expect(invalid).toMatchObject({ status: 400, code: 'missing_required_parameter', param: 'messages' });
  });

  it('answers with a canned sentence by default, after the first-token delay', async () => {
    const plain = await startOpenAiBackend({ firstTokenDelayMs: 50 });
    try {
      const sdk = new OpenAI({ apiKey: 'anything', baseURL: plain.url, maxRetries: 0 });
      const started = Date.now();
      const completion = await sdk.chat.completions.create({
        model: 'gpt-4o-mini',
        messages: [{ role: 'user', content: 'hi' }],
      });
      expect(completion.choices[0].message.content).toBe(cannedAnswer);
      expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    } finally {
      await plain.close();
    }
  });
});
