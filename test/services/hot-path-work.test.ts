/**
 * The typed proxy's work per request, counted (issue 28: its CPU per request doubled once and no
 * timing bench could tell; the project rule: complexity by counted work, time only in bench/).
 *
 * The shipped configs/typed-proxy.yaml runs in this process in front of the bench's JSON-RPC echo
 * upstream (bench/typed-proxy/upstream.ts, a child process), beside the Koa + undici floor that
 * `npm run bench` compares it with (bench/typed-proxy/bare-proxy.ts, BARE_BUFFER=1) in front of
 * the same upstream. After a warm-up, the async resources the server creates are counted by type
 * (node:async_hooks, test/helpers/async-work.ts) over windows of N, 2N and 3N sequential requests:
 * the N requests added from one window to the next must create exactly the same resources
 * (deterministic per request), and per request each type must stay within its budget
 * (docs/performance.md, "Work per request": the budgets and their reasons). An `await` more per
 * stage, a timer or a tick more per request fails here, named by type and count. The safety
 * filter's chat route (configs/safety-filter.yaml, the shipped dev tenant, not streamed) is
 * counted the same way in front of the bench's chat backend (bench/safety-filter/backend.ts).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify } from 'yaml';
import { type StartedService, startService } from '../../runtime/testing.ts';
import {
  type Ask,
  byProjectFrame,
  countWork,
  difference,
  divided,
  oneConnection,
  sequential,
  startChatBackend,
  startEchoUpstream,
  startKoaFloor,
} from '../helpers/async-work.ts';

const root = join(import.meta.dirname, '../..');
const config = join(root, 'configs/typed-proxy.yaml');
const N = 20;
const WARMUP = 100;
/** A loaded machine (the suite, other builds) makes hundreds of requests under the hook slow, not different. */
const TIMEOUT_MS = 120_000;

/**
 * Per request, by async resource type: at most this many (a type not listed: none). Lower them
 * when a change cuts work; raise one only with its reason in docs/performance.md.
 */
const budgets: Record<string, Record<string, number>> = {
  'POST / tools/call': { PROMISE: 34, TickObject: 12, Timeout: 4, Immediate: 5, onerror: 1 },
  'POST /mcp typed send': { PROMISE: 42, TickObject: 12, Timeout: 4, Immediate: 5, onerror: 1 },
  'safety filter chat': { PROMISE: 67, TickObject: 12, Timeout: 4, Immediate: 5, onerror: 1 },
};

const echoed = (status: number, text: string) => {
  if (status !== 200 || !text.includes('Echo: hello')) throw new Error(`unexpected answer ${status}: ${text}`);
};
/** The bench's requests (bench/services/cases.ts). */
const toolsCall: Ask = {
  path: '/',
  body: JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'echo', arguments: { message: 'hello' } },
  }),
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  check: echoed,
};
const typedSend: Ask = {
  path: '/mcp',
  body: JSON.stringify({ type: 'tools/call', tool: 'echo', arguments: { message: 'hello' } }),
  headers: { 'content-type': 'application/json' },
  check: echoed,
};

/** Per request by type, from windows of N, 2N and 3N requests; throws unless the two differences agree. */
async function workPerRequest(pool: Pool, ask: Ask, ports: number[]): Promise<Record<string, number>> {
  await sequential(pool, ask, WARMUP);
  const windows = [];
  for (const n of [N, 2 * N, 3 * N]) windows.push(await countWork(() => sequential(pool, ask, n), { ports }));
  const [a, b, c] = windows.map((w) => w.byType);
  const first = divided(difference(b, a), N);
  const second = divided(difference(c, b), N);
  expect(second, 'the same N requests created other resources the second time: not deterministic').toEqual(first);
  // HOT_PATH_WORK_STACKS=1: where each route's resources come from, by the innermost project frame.
  if (process.env.HOT_PATH_WORK_STACKS === '1') {
    const traced = await countWork(() => sequential(pool, ask, 10), { ports, stacks: true, stackLines: 16 });
    const lines = byProjectFrame(traced, root, 10).map(([where, n]) => `${String(n).padStart(5)}  ${where}`);
    console.info(`${ask.path}: resources per request by innermost project frame\n${lines.join('\n')}`);
  }
  return first;
}

/** Fails naming each type over its budget, with the count and the floor's. */
function withinBudget(route: string, work: Record<string, number>, floor: Record<string, number> | undefined): void {
  const budget = budgets[route];
  const over = Object.entries(work)
    .filter(([type, n]) => n > (budget[type] ?? 0))
    .map(([type, n]) => `${type} per request: ${n}, budget ${budget[type] ?? 0} (floor: ${floor?.[type] ?? '?'})`);
  expect(
    over,
    `${route} creates more async resources than its budget (docs/performance.md, "Work per request")`,
  ).toEqual([]);
}

describe('work per request, counted (typed proxy against the Koa + undici floor)', () => {
  let upstream: { url: string; child: ChildProcess };
  let svc: StartedService;
  let floor: { url: string; close: () => Promise<void> };
  const pools: Pool[] = [];
  const figures: Record<string, Record<string, number>> = {};

  beforeAll(async () => {
    upstream = await startEchoUpstream();
    svc = await startService(config, {
      set: [`upstreams.everything={kind: jsonrpc, url: "${upstream.url}"}`],
      env: {
        PROXY_AUTH: 'false',
        PROXY_RATE_LIMIT: 'false',
        PROXY_OAUTH: 'false',
        PROXY_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'sy-hot-path-')), 'audit.db'),
      },
    });
    floor = await startKoaFloor(upstream.url);
  }, TIMEOUT_MS);
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.destroy()));
    await svc?.close();
    await floor?.close();
    upstream?.child.kill('SIGKILL');
    if (process.env.HOT_PATH_WORK_PRINT === '1') console.info(JSON.stringify(figures, null, 1));
  });

  const connect = (url: string) => {
    const pool = oneConnection(url);
    pools.push(pool);
    return pool;
  };
  /** The ports whose sockets' work is counted: the server's listener, and its upstream's. */
  const portsOf = (url: string) => [Number(new URL(url).port), Number(new URL(upstream.url).port)];

  it(
    'the floor: the same work for every request',
    async () => {
      figures.floor = await workPerRequest(connect(floor.url), toolsCall, portsOf(floor.url));
      expect(figures.floor.PROMISE).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );

  for (const [route, ask] of [
    ['POST / tools/call', toolsCall],
    ['POST /mcp typed send', typedSend],
  ] as const) {
    it(
      `${route}: the same work for every request, within its budget`,
      async () => {
        const work = await workPerRequest(connect(svc.url), ask, portsOf(svc.url));
        figures[route] = work;
        withinBudget(route, work, figures.floor);
      },
      TIMEOUT_MS,
    );
  }
});

describe('work per request, counted (safety filter chat against the Koa + undici floor)', () => {
  let backend: { url: string; child: ChildProcess };
  let svc: StartedService;
  let floor: { url: string; close: () => Promise<void> };
  const pools: Pool[] = [];
  const figures: Record<string, Record<string, number>> = {};
  /** The bench's chat request (bench/services/cases.ts chatRequest(false)), ~1 KB no rule acts on. */
  const question =
    'Our team meets every Monday to plan the week. Last time we agreed to move the design review ' +
    'to Thursday, to finish the onboarding notes for the two engineers who join next month, and ' +
    'to load test the indexing service before the search feature ships. ';
  const chat: Ask = {
    path: '/v1/chat/completions',
    body: JSON.stringify({
      model: 'gpt-4o-mini',
      stream: false,
      messages: [
        { role: 'system', content: 'You are a helpful assistant that writes short, friendly summaries.' },
        { role: 'user', content: `${question.repeat(3)}Please summarise this for the newsletter.` },
      ],
    }),
    headers: {
      'content-type': 'application/json',
      accept: 'application/json',
      authorization: 'Bearer sk-dev-local-0001',
    },
    check: (status, text) => {
      if (status !== 200 || !text.includes('"chat.completion"'))
        throw new Error(`unexpected answer ${status}: ${text}`);
    },
  };

  beforeAll(async () => {
    backend = await startChatBackend();
    // The shipped dev tenant, its limits beyond what the requests reach (as bench/services/cases.ts).
    const dir = mkdtempSync(join(tmpdir(), 'sy-hot-path-'));
    const shipped = parseYaml(readFileSync(join(root, 'configs/safety-filter/tenants.yaml'), 'utf8')) as {
      tenants: Array<Record<string, unknown>>;
    };
    const dev = shipped.tenants.find((t) => t.id === 'dev');
    const tenants = join(dir, 'tenants.yaml');
    writeFileSync(tenants, stringify({ tenants: [{ ...dev, requests_per_minute: 1e8, tokens_per_minute: 1e11 }] }));
    svc = await startService(join(root, 'configs/safety-filter.yaml'), {
      set: [`upstreams.llm={kind: openai, url: "${backend.url}"}`],
      env: { FILTER_TENANTS_FILE: tenants, FILTER_AUDIT_PATH: join(dir, 'audit.db') },
    });
    floor = await startKoaFloor(`${backend.url}/chat/completions`);
  }, TIMEOUT_MS);
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.destroy()));
    await svc?.close();
    await floor?.close();
    backend?.child.kill('SIGKILL');
    if (process.env.HOT_PATH_WORK_PRINT === '1') console.info(JSON.stringify(figures, null, 1));
  });

  const measure = (url: string) => {
    const pool = oneConnection(url);
    pools.push(pool);
    return workPerRequest(pool, chat, [Number(new URL(url).port), Number(new URL(backend.url).port)]);
  };

  it(
    'the floor: the same work for every request',
    async () => {
      figures.floor = await measure(floor.url);
      expect(figures.floor.PROMISE).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );

  it(
    'chat, not streamed: the same work for every request, within its budget',
    async () => {
      figures['safety filter chat'] = await measure(svc.url);
      withinBudget('safety filter chat', figures['safety filter chat'], figures.floor);
    },
    TIMEOUT_MS,
  );
});
