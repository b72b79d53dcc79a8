/**
 * An `openai` upstream with its own key (api_key_env) and model names (model_map), against the
 * OpenAI-compatible fixture backend that accepts only that key.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import { type HttpUpstream, isHttpUpstream } from '../../runtime/upstreams/types.ts';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';

let backend: OpenAiBackend;
const upstreams: HttpUpstream[] = [];

beforeAll(async () => {
  backend = await startOpenAiBackend({ apiKey: 'sk-provider-secret' });
});

afterAll(async () => {
  for (const u of upstreams) await u.close();
  await backend?.close();
});

function provider(config: Record<string, unknown>, environment: NodeJS.ProcessEnv): HttpUpstream {
  const u = createUpstream('main', { kind: 'openai', url: backend.url, ...config } as never, {
    logger: silentLogger,
    configDir: '.',
    environment,
  });
  if (!isHttpUpstream(u)) throw new Error('not http');
  upstreams.push(u);
  return u;
}

describe('openai upstream as a provider', () => {
  it("sends its key from the environment in place of any client's, and maps model names", async () => {
    const u = provider(
      { api_key_env: 'PROVIDER_KEY', model_map: { 'gpt-4o': 'gpt-4o-2024-08-06' } },
      { PROVIDER_KEY: 'sk-provider-secret' },
    );
    const res = await u.forward({
      method: 'POST',
      path: '/chat/completions',
      headers: { 'content-type': 'application/json', Authorization: 'Bearer sk-client-key' },
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(200);
    res.body.resume();
    expect(backend.requests.at(-1)?.headers.authorization).toBe('Bearer sk-provider-secret');
    expect(JSON.stringify(backend.requests.at(-1)?.headers)).not.toContain('sk-client-key');
    expect(u.providerModel?.('gpt-4o')).toBe('gpt-4o-2024-08-06');
    expect(u.providerModel?.('gpt-4o-mini')).toBeUndefined();
  });

  it('refuses to start without its key, naming the variable and never a value', () => {
    expect(() => provider({ api_key_env: 'PROVIDER_KEY' }, {})).toThrow(
      'upstream "main": api_key_env: environment variable PROVIDER_KEY is not set',
    );
    expect(() => provider({ api_key_env: 'PROVIDER_KEY' }, { PROVIDER_KEY: '  ' })).toThrow(/PROVIDER_KEY is not set/);
  });

  it('without api_key_env the request goes as the proxy made it', async () => {
    const u = provider({}, {});
    const res = await u.forward({ method: 'GET', path: '/models', headers: {} });
    expect(res.status).toBe(401);
    res.body.resume();
    expect(u.providerModel).toBeUndefined();
  });
});
