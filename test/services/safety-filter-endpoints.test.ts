/**
 * The safety filter (configs/safety-filter.yaml) with its `llm` upstream given several endpoints:
 * chat answers, streamed or not, keep coming while one backend is up; a backend that dies mid-run
 * costs no request (its refused connection is retried on another), and a dead one is never used.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OpenAiBackend, startOpenAiBackend } from '../helpers/openai-backend.ts';
import { sample } from '../helpers/prometheus.ts';
import { freePort } from '../helpers/servers.ts';

const safetyFilter = join(import.meta.dirname, '../../configs/safety-filter.yaml');
const auth = { authorization: 'Bearer sk-dev-local-0001', 'content-type': 'application/json' };

describe('safety filter with several backend endpoints', () => {
  let a: OpenAiBackend;
  let b: OpenAiBackend;
  let svc: StartedService;
  const chats = (p: OpenAiBackend) => p.requests.filter((r) => r.path.endsWith('/chat/completions')).length;

  beforeAll(async () => {
    a = await startOpenAiBackend();
    b = await startOpenAiBackend();
    const dead = `http://127.0.0.1:${await freePort()}/v1`;
    svc = await startService(safetyFilter, {
      warmupMs: 2000,
      env: { FILTER_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'sf-endpoints-')), 'audit.db') },
      set: [
        `upstreams.llm={kind: openai, endpoints: [{url: "${a.url}"}, {url: "${b.url}"}, {url: "${dead}"}], ` +
          'timeout_ms: 5000, health_check: {interval_ms: 60000}, retry: {attempts: 3}}',
      ],
    });
  });
  afterAll(async () => {
    await svc?.close();
    await a?.close();
    await b?.close();
  });

  async function chat(stream: boolean): Promise<number> {
    const res = await fetch(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hello' }], stream }),
    });
    const text = await res.text();
    if (stream) expect(text).toContain('[DONE]');
    return res.status;
  }

  it('spreads requests over the live backends, skips the dead one, and survives one dying', async () => {
    const statuses = [];
    for (let n = 0; n < 6; n++) statuses.push(await chat(n % 2 === 1));
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200]);
    expect([chats(a), chats(b)]).toEqual([3, 3]);

    await b.close();
    const before = chats(a);
    for (let n = 0; n < 6; n++) statuses.push(await chat(n % 2 === 1));
    expect(statuses.slice(6)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(chats(a) - before).toBe(6);
    // The first request sent to the dead B was refused and tried again on A: once.
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(sample(metrics, 'switchyard_upstream_retries_total{upstream="llm",reason="connect_failure"')).toBe(1);
  });
});
