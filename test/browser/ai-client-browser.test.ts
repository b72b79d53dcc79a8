/**
 * The AI client bundle in a real browser (Debian's headless Chromium driven by playwright-core):
 * a page on localhost sets a config and makes a request, the page is reloaded, and the merged
 * config (from `ext_config`) and the cached answer (`ext_cache_*`) are still there, without the
 * API key the user typed. Skips with the reason shown when Chromium or playwright-core is missing,
 * except under CI=true, where that fails.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildAiClient, GLOBAL_NAME } from '../../scripts/build-ai-client.ts';
import { launchChromium, missing, requireBrowser } from '../helpers/chromium.ts';
import { openAiHandler, type RecordedRequest } from '../helpers/openai-backend.ts';

requireBrowser('test/browser/ai-client-browser.test.ts');

describe.skipIf(missing !== undefined)('AI client bundle in headless Chromium', () => {
  let work: string;
  const requests: RecordedRequest[] = [];
  let server: Server;
  let origin: string;
  let context: import('playwright-core').BrowserContext;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'aic-browser-'));
    const bundle = await buildAiClient({ outdir: join(work, 'dist'), provider: 'local', apiKey: 'sk-build-time' });
    const script = readFileSync(bundle.iife, 'utf8');
    const llm = openAiHandler({ reply: (r) => `answer to ${r.body.messages.at(-1).content}` }, requests);
    // One origin for the page, the bundle and the model: no CORS in the way.
    server = createServer((req, res) => {
      if (req.url === '/') {
        res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><script src="/ai-client.js"></script>');
      } else if (req.url === '/ai-client.js') {
        res.writeHead(200, { 'content-type': 'text/javascript' }).end(script);
      } else if (req.url?.startsWith('/v1/')) llm(req, res);
      else res.writeHead(404).end();
    });
    server.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    origin = `http://localhost:${(server.address() as AddressInfo).port}`;
    context = await launchChromium(work);
  });

  afterAll(async () => {
    await context?.close();
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('keeps the merged config and the cache across a reload, and never stores the typed key', async () => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(String(err)));
    await page.goto(`${origin}/`);

    const first = await page.evaluate(async (globalName) => {
      // biome-ignore lint/suspicious/noExplicitAny: the bundle's global, untyped in the page
      const lib = (window as any)[globalName];
      const service = new lib.AIService({});
      const before = service.getConfig();
      service.updateConfig({
        baseUrl: `${location.origin}/v1`,
        model: 'gpt-4o-mini',
        temperature: 0.2,
        systemPrompt: 'Be brief.',
        apiKey: 'sk-typed-by-user',
      });
      const answer = await service.chat([{ role: 'user', content: 'hello' }]);
      return { before, after: service.getConfig(), answer, problems: service.validate().problems };
    }, GLOBAL_NAME);
    // Build-time EXT_PROVIDER=local picked the preset; EXT_API_KEY is the default key.
    expect(first.before).toMatchObject({
      provider: 'local',
      baseUrl: 'http://localhost:11434/v1',
      apiKey: 'sk-build-time',
    });
    expect(first.after).toMatchObject({ provider: 'local', model: 'gpt-4o-mini', apiKey: 'sk-typed-by-user' });
    expect(first.answer).toMatchObject({ content: 'answer to hello', cached: false });
    expect(first.problems).toEqual([]);
    expect(requests).toHaveLength(1);
    expect(requests[0].headers.authorization).toBe('Bearer sk-typed-by-user');
    expect(requests[0].body.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });

    await page.reload();

    const second = await page.evaluate(async (globalName) => {
      // biome-ignore lint/suspicious/noExplicitAny: the bundle's global, untyped in the page
      const lib = (window as any)[globalName];
      const withKey = new lib.AIService({ apiKey: 'sk-page-two' });
      const answer = await withKey.chat([{ role: 'user', content: 'hello' }]);
      const storage = Object.fromEntries(Object.keys(localStorage).map((k) => [k, localStorage.getItem(k)]));
      return { config: withKey.getConfig(), plain: new lib.AIService({}).getConfig(), answer, storage };
    }, GLOBAL_NAME);
    expect(second.config).toEqual({
      provider: 'local',
      apiKey: 'sk-page-two',
      model: 'gpt-4o-mini',
      baseUrl: `${origin}/v1`,
      maxTokens: 2000,
      temperature: 0.2,
      systemPrompt: 'Be brief.',
    });
    // The typed key was not stored: after the reload the build-time default applies again.
    expect(second.plain.apiKey).toBe('sk-build-time');
    expect(second.answer).toMatchObject({ content: 'answer to hello', cached: true });
    expect(requests).toHaveLength(1);
    const keys = Object.keys(second.storage);
    expect(keys.filter((k) => k.startsWith('ext_cache_'))).toHaveLength(1);
    expect(JSON.parse(second.storage.ext_config as string)).toEqual({
      version: 1,
      config: { baseUrl: `${origin}/v1`, model: 'gpt-4o-mini', temperature: 0.2, systemPrompt: 'Be brief.' },
    });
    expect(JSON.stringify(second.storage)).not.toContain('sk-typed-by-user');
    expect(JSON.stringify(second.storage)).not.toContain('sk-page-two');
    expect(errors).toEqual([]);
  });
});
