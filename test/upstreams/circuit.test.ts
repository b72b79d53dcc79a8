/**
 * Circuit breaking (`max_requests`): at most that many calls in flight to an upstream; one more is
 * refused at once with 503 in the route's dialect, never reaches the upstream, and is counted.
 * Through the real safety filter (configs/safety-filter.yaml) in front of a backend that hangs.
 */
import { mkdtempSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

let backend: Server;
let backendUrl: string;
let received = 0;
const release: Array<() => void> = [];

beforeAll(async () => {
  backend = createServer((req, res) => {
    received++;
    req.resume();
    // Held until the test releases it: a slow model.
    release.push(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        }),
      );
    });
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendUrl = `http://127.0.0.1:${(backend.address() as AddressInfo).port}/v1`;
});
afterAll(() => new Promise<void>((r) => backend.close(() => r())));

describe('max_requests', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService('configs/safety-filter.yaml', {
      set: [`upstreams.llm={kind: openai, url: "${backendUrl}", max_requests: 2}`],
      env: { ...process.env, FILTER_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'sy-circuit-')), 'audit.db') },
      warmupMs: 500,
    });
  });
  afterAll(() => svc?.close());

  const chat = () =>
    fetch(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-dev-local-0001', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello there' }] }),
    });

  it('refuses the call over the bound with 503 in the OpenAI dialect; the upstream never sees it', async () => {
    const held = [chat(), chat()];
    while (received < 2) await new Promise((r) => setTimeout(r, 20));
    const refused = await chat();
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    const body = (await refused.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/requests in flight \(max_requests\)/);
    expect(received).toBe(2);
    for (const r of release.splice(0)) r();
    expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200]);
    // The slots are free again.
    const again = chat();
    while (received < 3) await new Promise((r) => setTimeout(r, 20));
    for (const r of release.splice(0)) r();
    expect((await again).status).toBe(200);
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_upstream_overflow_total\{[^}]*upstream="llm"[^}]*\} 1/);
  }, 30_000);

  it('is refused at load when not a positive integer', async () => {
    await expect(
      startService('configs/safety-filter.yaml', {
        set: [`upstreams.llm={kind: openai, url: "${backendUrl}", max_requests: 0}`],
      }),
    ).rejects.toThrow(/upstreams\.llm\.max_requests: must be >= 1/);
  });
});
