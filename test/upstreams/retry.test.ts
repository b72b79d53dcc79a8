/**
 * Retries with a budget, per-try and overall timeouts, and the pending / active bounds of an http
 * upstream, behind a real service (proxy stage), against fixture servers on 127.0.0.1 that die,
 * hang, reset, answer 5xx / 429 or recover. What reaches the fixtures is counted there: requests
 * keep succeeding while one endpoint is healthy, retries stay within the budget, a request that
 * reached an upstream is sent again only when it is idempotent (or refused with 429 / 503), and a
 * stream is never retried after its first byte.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import { backoffMs, resolveRetry, retryAfterMs } from '../../runtime/upstreams/retry.ts';
import type { HttpUpstream } from '../../runtime/upstreams/types.ts';
import { sample } from '../helpers/prometheus.ts';
import { closeNow, listenLocal, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

/** `hold`: kept until release(), then answered with `releaseStatus`; `stream`: an event, then the rest at release(). */
type Mode = 'ok' | 'hang' | 'reset' | 'sse-cut' | 'hold' | 'stream' | 'endless-503' | 'chunked-503' | number;

interface Fixture {
  url: string;
  mode: Mode;
  /** Status answered by held requests when released. */
  releaseStatus: number;
  /** Headers added to every answer that is not `ok`. */
  headers: Record<string, string>;
  /** Requests that reached this fixture (their headers and body arrived), with when. */
  hits: number;
  /** The connections requests came on. */
  sockets: Set<unknown>;
  arrivals: number[];
  methods: string[];
  release(): void;
  close(): void;
}

const opened: Array<{ close(): unknown }> = [];

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

async function fixture(name: string, mode: Mode = 'ok'): Promise<Fixture> {
  const held: ServerResponse[] = [];
  const streams: ServerResponse[] = [];
  const answer = (res: ServerResponse, status: number) =>
    res
      .writeHead(status, { 'content-type': 'application/json', 'x-endpoint': name, ...f.headers })
      .end(JSON.stringify({ from: name, status }));
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    f.sockets.add(req.socket);
    req.once('end', () => {
      f.hits++;
      f.arrivals.push(performance.now());
      f.methods.push(req.method ?? '');
      const mode = f.mode;
      if (mode === 'ok') {
        res.writeHead(200, { 'content-type': 'application/json', 'x-endpoint': name }).end(`{"from":"${name}"}`);
      } else if (mode === 'reset') {
        res.socket?.destroy(); // reached, then the connection drops before any answer
      } else if (mode === 'sse-cut') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-endpoint': name });
        res.write('data: one\n\n');
        setTimeout(() => res.socket?.destroy(), 20);
      } else if (mode === 'endless-503') {
        res.writeHead(503, { 'content-type': 'text/plain', 'x-endpoint': name });
        res.write('busy'); // and the body never ends
      } else if (mode === 'chunked-503') {
        // No Content-Length: the answer streams to the gateway (it does not come whole).
        res.writeHead(503, { 'content-type': 'text/plain', 'x-endpoint': name });
        res.write('busy, ');
        setTimeout(() => res.end('try again'), 5);
      } else if (mode === 'hold') {
        held.push(res);
      } else if (mode === 'stream') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'x-endpoint': name });
        res.write('data: one\n\n');
        streams.push(res);
      } else if (typeof mode === 'number') {
        answer(res, mode);
      } // hang: never answers
    });
  });
  const f: Fixture = {
    url: await listenLocal(server),
    mode,
    releaseStatus: 503,
    headers: {},
    hits: 0,
    sockets: new Set(),
    arrivals: [],
    methods: [],
    release: () => {
      for (const r of held.splice(0)) answer(r, f.releaseStatus);
      for (const r of streams.splice(0)) r.end('data: two\n\n');
    },
    close: () => closeNow(server),
  };
  opened.push(f);
  return f;
}

async function service(upstream: string, extra = ''): Promise<StartedService> {
  const file = writeServiceFile(`service: retries
listen: { port: 0 }
metrics: { port: 0 }
admin: { port: 0 }
${extra}
upstreams:
  llm:
${upstream
  .trim()
  .split('\n')
  .map((l) => `    ${l}`)
  .join('\n')}
routes:
  - match: { method: [GET, POST, PUT], path: /:what }
    pipeline: [{ proxy: { upstream: llm, forward_headers: [idempotency-key] } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

const endpoints = (...urls: string[]) => `endpoints: [${urls.map((u) => `{ url: "${u}" }`).join(', ')}]`;

async function send(svc: StartedService, method = 'GET', path = '/ok', headers: Record<string, string> = {}) {
  const res = await fetch(`${svc.url}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    body: method === 'GET' ? undefined : '{"order":"one"}',
  });
  const text = await res.text();
  return {
    status: res.status,
    endpoint: res.headers.get('x-endpoint'),
    retryAfter: res.headers.get('retry-after'),
    body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined,
  };
}

async function metric(svc: StartedService, name: string, labels: string): Promise<number | undefined> {
  const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
  return sample(text, `${name}{${labels},service="retries"}`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('retries', () => {
  it('requests keep succeeding while one endpoint is healthy: dead, resetting, hanging and 503 ones are retried elsewhere', async () => {
    const a = await fixture('a');
    const d = await fixture('d');
    const r = await fixture('r', 'reset');
    const h = await fixture('h', 'hang');
    const s = await fixture('s', 503);
    const svc = await service(`kind: http
${endpoints(d.url, r.url, h.url, s.url, a.url)}
timeout_ms: 10000
health_check: { interval_ms: 60000 }
outlier: { consecutive_failures: 100 }
retry: { attempts: 5, on: [connect_failure, reset, timeout, 503], per_try_timeout_ms: 150, backoff: { base_ms: 0, max_ms: 0 } }`);
    d.close(); // up when the service started, then gone: the next request to it is refused
    const answers = [];
    for (let n = 0; n < 6; n++) answers.push(await send(svc, 'GET'));
    expect(answers.map((x) => [x.status, x.endpoint])).toEqual(Array(6).fill([200, 'a']));
    // Each bad endpoint was tried, and only the healthy one answered.
    expect(r.hits).toBeGreaterThan(0);
    expect(h.hits).toBeGreaterThan(0);
    expect(s.hits).toBeGreaterThan(0);
    const retried = (reason: string) =>
      metric(svc, 'switchyard_upstream_retries_total', `upstream="llm",reason="${reason}"`);
    expect(await retried('reset')).toBe(r.hits);
    expect(await retried('timeout')).toBe(h.hits);
    expect(await retried('503')).toBe(s.hits);
    expect(await retried('connect_failure')).toBe(1); // then known down, not picked again
    expect(d.hits).toBe(0);

    // The 503 one recovers: it answers again.
    s.mode = 'ok';
    const seen = new Set<string | null>();
    for (let n = 0; n < 10; n++) seen.add((await send(svc, 'GET')).endpoint);
    expect(seen).toEqual(new Set(['a', 's']));
  });

  it('a 429 with Retry-After is retried on another endpoint no sooner than it says; a longer one is passed through', async () => {
    const a = await fixture('a', 429);
    a.headers = { 'retry-after': '1' };
    const b = await fixture('b');
    const svc = await service(`kind: openai
${endpoints(a.url, b.url)}
health_check: { interval_ms: 60000 }
retry: { attempts: 2, on: [connect_failure, 429], max_retry_after_ms: 2000 }`);
    // POST: a 429 is a refusal, retried for any method. Round-robin starts with a.
    const first = await send(svc, 'POST');
    expect([first.status, first.endpoint]).toEqual([200, 'b']);
    expect([a.hits, b.hits]).toEqual([1, 1]);
    expect((b.arrivals[0] as number) - (a.arrivals[0] as number)).toBeGreaterThanOrEqual(995);
    expect(await metric(svc, 'switchyard_upstream_retries_total', 'upstream="llm",reason="429"')).toBe(1);

    // Longer than max_retry_after_ms: the client gets the 429 and its Retry-After, nobody else is asked.
    a.headers = { 'retry-after': '30' };
    b.mode = 429;
    b.headers = { 'retry-after': '30' };
    const passed = await send(svc, 'POST');
    expect([passed.status, passed.retryAfter]).toEqual([429, '30']);
    expect(a.hits + b.hits).toBe(3);
  });

  it('the budget bounds retries when every endpoint fails: counted at the fixtures, the rest are refused and counted', async () => {
    const a = await fixture('a', 'hold');
    const b = await fixture('b', 'hold');
    const svc = await service(`kind: http
${endpoints(a.url, b.url)}
health_check: { interval_ms: 60000 }
outlier: { consecutive_failures: 100 }
retry: { attempts: 3, on: [503], backoff: { base_ms: 0, max_ms: 0 }, budget: { percent: 10, min_concurrency: 2 } }`);
    const hits = () => a.hits + b.hits;
    const release = () => {
      a.release();
      b.release();
    };
    const n = 10;
    const all = Promise.all(Array.from({ length: n }, () => send(svc, 'GET')));
    await until(() => hits() === n);
    release(); // ten 503s at once: max(2, 10% of 10) = 2 retries may be under way
    await until(() => hits() === n + 2);
    await sleep(150);
    expect(hits()).toBe(n + 2);
    release(); // the two retries fail too: their third tries are within the budget
    await until(() => hits() === n + 4);
    await sleep(150);
    expect(hits()).toBe(n + 4);
    release();
    const answers = await all;
    expect(answers.map((x) => x.status)).toEqual(Array(n).fill(503));
    expect(await metric(svc, 'switchyard_upstream_retries_total', 'upstream="llm",reason="503"')).toBe(4);
    expect(await metric(svc, 'switchyard_upstream_retry_budget_exhausted_total', 'upstream="llm"')).toBe(8);
  });

  it.each([
    ['a 500', 500 as Mode, 500],
    ['a reset', 'reset' as Mode, 502],
    ['no answer within the per-try timeout', 'hang' as Mode, 504],
  ])(
    'a POST that reached the upstream and got %s is never sent twice; a GET (or an Idempotency-Key) is retried',
    async (_, mode, status) => {
      const bad = await fixture('bad', mode);
      const good = await fixture('good');
      const svc = await service(`kind: http
${endpoints(bad.url, good.url)}
timeout_ms: 5000
health_check: { interval_ms: 60000 }
outlier: { consecutive_failures: 100 }
retry: { attempts: 2, on: [connect_failure, reset, timeout, 500, 502, 503, 504], per_try_timeout_ms: 200 }`);
      // POSTs are not retried: round-robin sends one to each.
      const posted = [await send(svc, 'POST'), await send(svc, 'POST')];
      expect(posted.map((x) => x.status).sort()).toEqual([200, status].sort());
      expect([bad.hits, good.hits]).toEqual([1, 1]);
      expect(bad.methods).toEqual(['POST']);

      for (const [method, headers] of [
        ['GET', {}],
        ['PUT', {}],
        ['POST', { 'idempotency-key': 'k-1' }],
      ] as const) {
        // Sent until one went to the bad endpoint first: each answered by the good one, once.
        const before = [bad.hits, good.hits] as const;
        let sent = 0;
        while (bad.hits === before[0] && sent < 4) {
          const res = await send(svc, method, '/ok', headers);
          sent++;
          expect([method, res.status, res.endpoint]).toEqual([method, 200, 'good']);
        }
        expect([bad.hits - before[0], good.hits - before[1]]).toEqual([1, sent]);
      }
    },
  );

  it('a stream cut after its first byte is never retried (GET or POST)', async () => {
    const a = await fixture('a', 'sse-cut');
    const b = await fixture('b', 'sse-cut');
    const svc = await service(`kind: openai
${endpoints(a.url, b.url)}
retry: { attempts: 3, on: [connect_failure, reset, timeout, 500, 502, 503] }`);
    for (const method of ['GET', 'POST']) {
      const before = a.hits + b.hits;
      const res = await fetch(`${svc.url}/sse`, { method, body: method === 'POST' ? '{}' : undefined });
      expect(res.status).toBe(200);
      await expect(res.text()).rejects.toThrow();
      expect(a.hits + b.hits - before).toBe(1);
    }
    expect(await metric(svc, 'switchyard_upstream_retries_total', 'upstream="llm",reason="reset"')).toBeUndefined();
  });

  it('the overall timeout bounds every try and backoff: 504 naming timeout_ms, no try past it', async () => {
    const a = await fixture('a', 'hang');
    const b = await fixture('b', 'hang');
    const svc = await service(`kind: http
${endpoints(a.url, b.url)}
timeout_ms: 500
health_check: { interval_ms: 60000 }
outlier: { consecutive_failures: 100 }
retry: { attempts: 10, on: [timeout], per_try_timeout_ms: 300, backoff: { base_ms: 0, max_ms: 0 } }`);
    const started = performance.now();
    const res = await send(svc, 'GET');
    expect(performance.now() - started).toBeGreaterThanOrEqual(495);
    expect(res.status).toBe(504);
    expect(res.body).toMatchObject({ error: 'upstream_timeout', details: { upstream: 'llm', timeout_ms: 500 } });
    // 300 ms on one, the 200 ms left on the other; ten attempts allowed, two made.
    expect(a.hits + b.hits).toBe(2);
  });

  it('a single url with retry: is retried on that same endpoint', async () => {
    const a = await fixture('a', 503);
    const svc = await service(`kind: http
url: "${a.url}"
retry: { attempts: 3, on: [connect_failure, 503], backoff: { base_ms: 0, max_ms: 0 } }`);
    expect((await send(svc, 'GET')).status).toBe(503);
    expect(a.hits).toBe(3);
    a.mode = 'ok';
    expect((await send(svc, 'GET')).status).toBe(200);
    expect(a.hits).toBe(4);
  });

  it('in a service with the openai dialect: the per-try timeout of the last try is the dialect error', async () => {
    const a = await fixture('a', 'hang');
    const svc = await service(
      `kind: openai
url: "${a.url}"
timeout_ms: 300
retry: { attempts: 2, on: [timeout], per_try_timeout_ms: 100, backoff: { base_ms: 0, max_ms: 0 } }`,
      'dialect: openai',
    );
    const res = await send(svc, 'GET', '/models');
    expect(res.status).toBe(502);
    expect(res.body).toMatchObject({
      error: { type: 'backend_error', message: 'Upstream did not answer within 100 ms', details: { upstream: 'llm' } },
    });
    expect(a.hits).toBe(2);
  });

  it('a misspelt retry setting is a config error naming it', async () => {
    await expect(service(`kind: http\nurl: "http://127.0.0.1:1"\nretry: { on: [connect_failures] }`)).rejects.toThrow(
      /retry\.on/,
    );
    await expect(service(`kind: http\nurl: "http://127.0.0.1:1"\nretry: { budget: { share: 1 } }`)).rejects.toThrow(
      /share/,
    );
  });
});

describe('pending and active bounds', () => {
  it('max_active requests are under way, max_pending wait, one more is 503 in the dialect and never sent', async () => {
    const a = await fixture('a', 'hold');
    a.releaseStatus = 200;
    const svc = await service(
      `kind: openai
url: "${a.url}"
max_active: 1
max_pending: 1`,
      'dialect: openai',
    );
    const first = send(svc, 'POST');
    await until(() => a.hits === 1);
    const second = send(svc, 'POST'); // waits for the slot
    await sleep(100);
    const refused = await send(svc, 'POST');
    expect(refused.status).toBe(503);
    expect(refused.retryAfter).toBe('1');
    expect(refused.body).toMatchObject({
      error: { message: expect.stringMatching(/waiting for a slot \(max_pending\)/) },
    });
    expect(a.hits).toBe(1);
    expect(await metric(svc, 'switchyard_upstream_active_requests', 'upstream="llm"')).toBe(1);
    expect(await metric(svc, 'switchyard_upstream_pending_requests', 'upstream="llm"')).toBe(1);
    a.release();
    expect((await first).status).toBe(200);
    await until(() => a.hits === 2); // the slot passed to the waiting one
    a.release();
    expect((await second).status).toBe(200);
    // Small answers came whole: each gave its slot back once it was in, with no body left to read.
    expect(await metric(svc, 'switchyard_upstream_active_requests', 'upstream="llm"')).toBe(0);
    expect(await metric(svc, 'switchyard_upstream_pending_overflow_total', 'upstream="llm"')).toBe(1);
    expect(await metric(svc, 'switchyard_upstream_pending_total', 'upstream="llm"')).toBe(1);
  });

  it('a streamed answer holds its slot; a request waiting longer than timeout_ms gets 504 and is never sent', async () => {
    const a = await fixture('a', 'stream');
    const svc = await service(`kind: http
url: "${a.url}"
timeout_ms: 300
max_active: 1`);
    const first = fetch(`${svc.url}/events`);
    await until(() => a.hits === 1);
    const waited = await send(svc, 'GET');
    expect(waited.status).toBe(504);
    expect(waited.body).toMatchObject({ error: 'upstream_timeout', message: expect.stringMatching(/no free slot/) });
    expect(a.hits).toBe(1);
    a.release();
    expect(await (await first).text()).toBe('data: one\n\ndata: two\n\n');
    a.mode = 'ok';
    expect((await send(svc, 'GET')).status).toBe(200); // the slot is free again
  });
});

describe('leaving the queue', () => {
  it('a client that goes away while waiting for a slot leaves the queue: the slot goes to the next one', async () => {
    const a = await fixture('a', 'hold');
    a.releaseStatus = 200;
    const upstream = createUpstream(
      'llm',
      { kind: 'http', url: a.url, max_active: 1, timeout_ms: 5000 },
      { logger: silentLogger, configDir: process.cwd() },
    ) as HttpUpstream;
    opened.push(upstream);
    await upstream.checked?.(2000);
    const get = (signal?: AbortSignal) => upstream.forward({ method: 'GET', path: '/x', headers: {}, signal });
    const first = get();
    await until(() => a.hits === 1);
    const client = new AbortController();
    const gone = get(client.signal);
    client.abort();
    await expect(gone).rejects.toMatchObject({ kind: 'bad_request' });
    const third = get();
    a.release();
    const res = await first;
    for await (const _ of res.body);
    await until(() => a.hits === 2); // the third, not the one that left
    a.release();
    expect((await third).status).toBe(200);
  });
});

describe('letting go', () => {
  const direct = (config: Record<string, unknown>) => {
    const upstream = createUpstream('llm', { kind: 'http', ...config } as never, {
      logger: silentLogger,
      configDir: process.cwd(),
    }) as HttpUpstream;
    opened.push(upstream);
    return upstream;
  };

  it('a client that goes away during the backoff: nothing more is sent, and its place in the budget is returned', async () => {
    const a = await fixture('a', 503);
    a.headers = { 'retry-after': '1' };
    const b = await fixture('b');
    const upstream = direct({
      endpoints: [{ url: a.url }, { url: b.url }],
      health_check: { interval_ms: 60000 },
      outlier: { consecutive_failures: 100 },
      retry: { attempts: 2, on: [503], budget: { percent: 0, min_concurrency: 1 } },
    });
    await upstream.checked?.(2000);
    const client = new AbortController();
    const pending = upstream.forward({ method: 'GET', path: '/x', headers: {}, signal: client.signal });
    await until(() => a.hits === 1);
    client.abort();
    await expect(pending).rejects.toMatchObject({ kind: 'bad_request' });
    await sleep(1100);
    expect(b.hits).toBe(0);
    // The one place of the budget is free: the next 503 is retried (round-robin: b, then a -> b).
    a.headers = {};
    for (let n = 0; n < 2; n++) {
      const res = await upstream.forward({ method: 'GET', path: '/x', headers: {} });
      expect(res.status).toBe(200);
      for await (const _ of res.body);
    }
    expect([a.hits, b.hits]).toEqual([2, 2]);
  });

  it('a retried answer that streams is read to its end and dropped: its connection is reused', async () => {
    const a = await fixture('a', 'chunked-503');
    const upstream = direct({
      url: a.url,
      connections: 1,
      retry: { attempts: 3, on: [503], backoff: { base_ms: 0, max_ms: 0 } },
    });
    await upstream.checked?.(2000);
    const res = await upstream.forward({ method: 'GET', path: '/x', headers: {} });
    expect(res.status).toBe(503);
    for await (const _ of res.body);
    expect(a.hits).toBe(3);
    // The two answers retried were drained, not cut: the three tries went over one connection.
    expect(a.sockets.size).toBe(1);
  });

  it('a retried answer whose body never ends does not hold its connection', async () => {
    const a = await fixture('a', 'endless-503');
    const upstream = direct({
      url: a.url,
      connections: 1,
      retry: { attempts: 2, on: [503], backoff: { base_ms: 0, max_ms: 0 } },
    });
    await upstream.checked?.(2000);
    // One connection: the retry can only be sent once the first answer's socket is let go.
    const res = await upstream.forward({ method: 'GET', path: '/x', headers: {} });
    expect(res.status).toBe(503);
    expect(a.hits).toBe(2);
    res.body.destroy();
  });
});

describe('retry policy', () => {
  it('backoff is full jitter within the doubling bound; Retry-After reads seconds and HTTP dates', () => {
    const p = resolveRetry({ backoff: { base_ms: 100, max_ms: 1000 } });
    expect(backoffMs(p, 1, () => 0.999)).toBe(99);
    expect(backoffMs(p, 3, () => 0.999)).toBe(399);
    expect(backoffMs(p, 10, () => 0.999)).toBe(999);
    expect(backoffMs(p, 2, () => 0)).toBe(0);
    const res = (v: string) => ({ status: 429, headers: { 'retry-after': v }, body: null as never });
    expect(retryAfterMs(res('3'))).toBe(3000);
    const now = Date.parse('Fri, 27 Nov 2026 04:00:00 GMT');
    expect(retryAfterMs(res('Fri, 27 Nov 2026 04:00:05 GMT'), now)).toBe(5000);
    expect(retryAfterMs(res('soon'))).toBeUndefined();
  });

  it('a response that is retried is let go of: its connection is reused, none is left held', async () => {
    const a = await fixture('a', 503);
    const upstream = createUpstream(
      'llm',
      {
        kind: 'http',
        url: a.url,
        connections: 1,
        retry: { attempts: 3, on: [503], backoff: { base_ms: 0, max_ms: 0 } },
      },
      { logger: silentLogger, configDir: process.cwd() },
    ) as HttpUpstream;
    opened.push(upstream);
    await upstream.checked?.(2000);
    // One connection in the pool: a held body would stall every later try.
    for (let n = 0; n < 3; n++) {
      const res = await upstream.forward({ method: 'GET', path: '/x', headers: {} });
      expect(res.status).toBe(503);
      for await (const _ of res.body); // read to the end: the connection is free again
    }
    expect(a.hits).toBe(9);
  });
});
