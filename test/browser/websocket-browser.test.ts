/**
 * The safety filter's WebSocket endpoint from a real browser (headless Chromium): a browser's
 * WebSocket cannot carry an Authorization header, so the page offers the API key as a subprotocol
 * (`authorization.bearer.<base64url key>`, next to `chat`), and gets the chat answer as frames.
 * Skips with the reason shown when Chromium or playwright-core is missing, except under CI=true.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { launchChromium, missing, requireBrowser } from '../helpers/chromium.ts';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';

requireBrowser('test/browser/websocket-browser.test.ts');

describe.skipIf(missing !== undefined)('safety filter WebSocket in headless Chromium', () => {
  let work: string;
  let backend: OpenAiBackend;
  let svc: StartedService;
  let context: import('playwright-core').BrowserContext;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'ws-browser-'));
    backend = await startOpenAiBackend({ reply: (r) => `You said: ${r.body.messages.at(-1).content}`, chunkSize: 4 });
    svc = await startService('configs/safety-filter.yaml', {
      env: { FILTER_BACKEND_URL: backend.url, FILTER_AUDIT_PATH: join(work, 'audit.db') },
    });
    context = await launchChromium(work);
  }, 60_000);

  afterAll(async () => {
    await context?.close();
    await svc?.close();
    await backend?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** In the page: opens the socket with these protocols, sends one chat message, collects the frames. */
  const chatInPage = (url: string, key: string | undefined, content: string) =>
    context.pages()[0].evaluate(
      ({ url, key, content }) =>
        new Promise<{ protocol: string; frames: Array<Record<string, unknown>> }>((resolve, reject) => {
          const b64url = (s: string) => btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
          const protocols = key === undefined ? ['chat'] : ['chat', `authorization.bearer.${b64url(key)}`];
          const ws = new WebSocket(url, protocols);
          const frames: Array<Record<string, unknown>> = [];
          ws.onerror = () => reject(new Error('websocket error'));
          ws.onopen = () => ws.send(JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }));
          ws.onmessage = (m) => {
            const frame = JSON.parse(m.data);
            frames.push(frame);
            if (frame.done || frame.error) {
              ws.close();
              resolve({ protocol: ws.protocol, frames });
            }
          };
        }),
      { url, key, content },
    );

  it('streams the answer with the key offered as a subprotocol, and refuses a wrong key', async () => {
    if (context.pages().length === 0) await context.newPage();
    // A page of the service's own origin: a blank page's opaque Origin (`null`) is refused.
    await context.pages()[0].goto(`${svc.url}/health`);
    const url = `${svc.url.replace('http', 'ws')}/v1/chat/stream`;
    const ok = await chatInPage(url, 'sk-dev-local-0001', 'hello from Chromium');
    expect(ok.protocol).toBe('chat');
    const text = ok.frames
      .map((f) => (f.choices as Array<{ delta?: { content?: string } }> | undefined)?.[0]?.delta?.content ?? '')
      .join('');
    expect(text).toBe('You said: hello from Chromium');
    expect(ok.frames.length).toBeGreaterThan(2); // streamed in several frames, then done
    expect(ok.frames.at(-1)).toMatchObject({ done: true });

    // The handshake is authenticated: a wrong key never gets a socket (the browser sees an error).
    await expect(chatInPage(url, 'sk-wrong', 'hello')).rejects.toThrow(/websocket error/);
  });
});
