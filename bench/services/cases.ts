/**
 * What `npm run bench` measures of each shipped service: its config from configs/ as it ships
 * (only ports, the upstream's address and the data paths overridden), its main route(s), the
 * request sent, how an answer is checked, and which floor it is compared with. See
 * bench/README.md ("npm run bench").
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'undici';
import { parse as parseYaml, stringify } from 'yaml';
import type { Target } from '../common/measure.ts';
import type { Goal } from '../common/ratios.ts';
import { startService } from '../common/switchyard.ts';
import { benchModelsDir, ensureModel } from '../embed/shapes.ts';
import { filterSets } from '../safety-filter/filter-setup.ts';
import { freePort, type Started } from '../typed-proxy/children.ts';

/**
 * Which floor a route is compared with: the bare proxies in front of the same upstream with the
 * same request (`jsonrpc`: the JSON-RPC echo upstream; `chat`, `chat-stream`: the LLM fixture).
 * Services with no upstream (registry, datastore, ranking, embedding) are compared with the
 * `jsonrpc` floor: the least a Node server does to answer a request at all.
 */
export type Family = 'jsonrpc' | 'chat' | 'chat-stream';

export interface Subject extends Target {
  service: string;
  label: string;
  family: Family;
  /** Whether it forwards to the family's upstream (whose CPU per request is then reported beside). */
  proxied: boolean;
  goal: Goal;
  /** Whether an answer's body is the right one (status and header are checked apart). */
  accept: (text: string) => boolean;
}

/** A subject before its process runs. */
export type Route = Omit<Subject, 'proc' | 'upstream'>;
const running = (proc: Started, ...routes: Route[]): Subject[] => routes.map((r) => ({ ...r, proc }));

export interface Context {
  /** The checkout the services run from (this one, or BENCH_BASELINE). */
  dir: string;
  run: 'dist' | 'source';
  cpu?: string;
  logDir: string;
  /** Node flags for a service process (CPU profiling), by its name. */
  nodeFlags: (name: string) => string[];
  /** A command a service process runs under (callgrind), by its name: argv before node's. */
  wrap?: (name: string) => string[];
  /** Appended to keys and labels: '' for this checkout, '@base' for the baseline. */
  suffix: string;
  echoUrl: string;
  backendUrl?: string;
  /** Extra `--set` overrides for the typed proxy (BENCH_TYPED_SET). */
  typedSet: string[];
  /** Extra `--set` overrides for every service (bench:instructions: timeouts a process under valgrind needs). */
  sets?: string[];
  readyTimeoutMs: number;
}

export interface ServiceCase {
  /** The config's name in configs/ (what BENCH_SERVICES lists). */
  name: string;
  /** The floors its routes need. */
  families: Family[];
  start(c: Context): Promise<Subject[]>;
}

/** One request as the load generator sends it; the status, the headers and the text of the answer. */
export async function ask(
  t: Omit<Target, 'proc'>,
): Promise<{ status: number; headers: Record<string, unknown>; text: string }> {
  const res = await request(t.url, {
    method: t.method ?? 'POST',
    headers: t.headers,
    body: t.body,
    headersTimeout: 10000,
    bodyTimeout: 10000,
  });
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
}

/** Throws unless the answer is a 2xx with the expected header and body: what readiness and the bench's first check wait for. */
export async function verify(t: Omit<Target, 'proc'> & { accept?: (text: string) => boolean }): Promise<void> {
  const a = await ask(t);
  if (a.status < 200 || a.status > 299) throw new Error(`${t.url}: status ${a.status}: ${a.text.slice(0, 300)}`);
  if (t.expectHeader && a.headers[t.expectHeader.toLowerCase()] === undefined) {
    throw new Error(`${t.url}: no ${t.expectHeader} header`);
  }
  if (t.accept && !t.accept(a.text)) throw new Error(`${t.url}: unexpected answer: ${a.text.slice(0, 300)}`);
}

const json = { 'content-type': 'application/json' };

/** The typed proxy's request: `tools/call` of `echo`, what MCP clients send most. */
export const toolsCall = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'echo', arguments: { message: 'hello' } },
});
export const toolsCallHeaders = { ...json, accept: 'application/json, text/event-stream' };
const echoed = (text: string) => text.includes('Echo: hello');

/** A chat request of ~1 KB: a system prompt and an ordinary question no rule acts on. */
export function chatRequest(stream: boolean): string {
  const question =
    'Our team meets every Monday to plan the week. Last time we agreed to move the design review ' +
    'to Thursday, to finish the onboarding notes for the two engineers who join next month, and ' +
    'to load test the indexing service before the search feature ships. ';
  return JSON.stringify({
    model: 'gpt-4o-mini',
    stream,
    messages: [
      { role: 'system', content: 'You are a helpful assistant that writes short, friendly summaries.' },
      { role: 'user', content: `${question.repeat(3)}Please summarise this for the newsletter.` },
    ],
  });
}
const chatAccept = (stream: boolean) => (text: string) =>
  stream ? text.includes('[DONE]') : text.includes('"chat.completion"');

/** Free ports for the listener and each extra listener the config declares (`--set <name>.port=`). */
async function ports(listeners: string[]): Promise<{ port: number; sets: string[] }> {
  const port = await freePort();
  const sets = [`listen.port=${port}`];
  for (const l of listeners) sets.push(`${l}.port=${await freePort()}`);
  return { port, sets };
}

/** Starts one service and resolves once its first subject answers as checked. */
async function serve(
  c: Context,
  o: { name: string; config: string; sets?: string[]; env?: Record<string, string>; first: Route },
) {
  return startService({
    dir: c.dir,
    config: o.config,
    sets: [...(o.sets ?? []), ...(c.sets ?? [])],
    env: o.env,
    run: c.run,
    cpu: c.cpu,
    nodeFlags: c.nodeFlags(o.name + c.suffix),
    wrap: c.wrap?.(o.name + c.suffix),
    logFile: join(c.logDir, `${o.name}${c.suffix}.log`),
    name: o.name,
    readyTimeoutMs: c.readyTimeoutMs,
    probe: () => verify(o.first),
  });
}

const typedProxy: ServiceCase = {
  name: 'typed-proxy',
  families: ['jsonrpc'],
  async start(c) {
    const { port, sets } = await ports(['metrics', 'admin']);
    const base = `http://127.0.0.1:${port}`;
    const common = {
      service: 'typed-proxy',
      family: 'jsonrpc' as const,
      proxied: true,
      goal: { cpu: 1.2, p99: 1.5 },
    };
    const rpc: Route = {
      ...common,
      key: `typed-proxy/jsonrpc${c.suffix}`,
      label: `typed proxy, POST / tools/call${c.suffix}`,
      url: `${base}/`,
      body: toolsCall,
      headers: toolsCallHeaders,
      expectHeader: 'X-Proxy-SType',
      accept: echoed,
    };
    const send: Route = {
      ...rpc,
      key: `typed-proxy/send${c.suffix}`,
      label: `typed proxy, POST /mcp typed send${c.suffix}`,
      url: `${base}/mcp`,
      body: JSON.stringify({ type: 'tools/call', tool: 'echo', arguments: { message: 'hello' } }),
      headers: json,
    };
    const s = await serve(c, {
      name: 'typed-proxy',
      config: 'configs/typed-proxy.yaml',
      sets: [...sets, `upstreams.everything={kind: jsonrpc, url: "${c.echoUrl}"}`, ...c.typedSet],
      // Auth and rate limiting off whatever the environment says (their defaults); the audit trail in the run's folder.
      env: { PROXY_AUTH: 'false', PROXY_RATE_LIMIT: 'false', PROXY_AUDIT_PATH: join(c.logDir, `audit${c.suffix}.db`) },
      first: rpc,
    });
    await verify(send);
    return running(s, rpc, send);
  },
};

/**
 * The shipped tenants file with its development tenant's request and token limits raised beyond
 * what the load reaches (600 requests a minute would answer 429 within a second), written to `dir`.
 */
function benchTenants(c: Context): string {
  const shipped = parseYaml(readFileSync(join(c.dir, 'configs/safety-filter/tenants.yaml'), 'utf8')) as {
    tenants: Array<Record<string, unknown>>;
  };
  const dev = shipped.tenants.find((t) => t.id === 'dev');
  if (!dev) throw new Error('configs/safety-filter/tenants.yaml has no dev tenant');
  const file = join(c.logDir, `tenants${c.suffix}.yaml`);
  const tenant = { ...dev, requests_per_minute: 100_000_000, tokens_per_minute: 100_000_000_000 };
  writeFileSync(file, stringify({ tenants: [tenant] }));
  return file;
}

const safetyFilter: ServiceCase = {
  name: 'safety-filter',
  families: ['chat', 'chat-stream'],
  async start(c) {
    if (!c.backendUrl) throw new Error('no LLM backend');
    const { port, sets } = await filterSets(Number(new URL(c.backendUrl).port));
    const url = `http://127.0.0.1:${port}/v1/chat/completions`;
    const headers = { ...json, accept: 'application/json', authorization: 'Bearer sk-dev-local-0001' };
    const common = {
      service: 'safety-filter',
      url,
      headers,
      expectHeader: 'X-Filter-Decision',
      proxied: true,
      goal: { cpu: 1.5, p99: 1.5 },
    };
    const chat: Route = {
      ...common,
      key: `safety-filter/chat${c.suffix}`,
      label: `safety filter, chat${c.suffix}`,
      family: 'chat',
      body: chatRequest(false),
      accept: chatAccept(false),
    };
    const stream: Route = {
      ...common,
      key: `safety-filter/chat-stream${c.suffix}`,
      label: `safety filter, chat streamed${c.suffix}`,
      family: 'chat-stream',
      body: chatRequest(true),
      accept: chatAccept(true),
    };
    const s = await serve(c, {
      name: 'safety-filter',
      config: 'configs/safety-filter.yaml',
      sets,
      env: { FILTER_TENANTS_FILE: benchTenants(c), FILTER_AUDIT_PATH: join(c.logDir, `filter-audit${c.suffix}.db`) },
      first: chat,
    });
    await verify(stream);
    return running(s, chat, stream);
  },
};

/** A service with no upstream: compared with the `jsonrpc` floor, at most 2× without a written reason. */
const standalone = { family: 'jsonrpc' as const, proxied: false, goal: { cpu: 2 } };

const registry: ServiceCase = {
  name: 'registry-api',
  families: ['jsonrpc'],
  async start(c) {
    const { port, sets } = await ports(['metrics', 'admin']);
    const search: Route = {
      ...standalone,
      service: 'registry-api',
      key: `registry-api/search${c.suffix}`,
      label: `registry, GET /api/search${c.suffix}`,
      url: `http://127.0.0.1:${port}/api/search?q=echo`,
      method: 'GET',
      headers: {},
      accept: (text: string) => text.includes('echo'),
    };
    return running(
      await serve(c, { name: 'registry-api', config: 'configs/registry-api.yaml', sets, first: search }),
      search,
    );
  },
};

const datastore: ServiceCase = {
  name: 'datastore',
  families: ['jsonrpc'],
  async start(c) {
    const [port, metrics] = [await freePort(), await freePort()];
    const base = `http://127.0.0.1:${port}/v1/entities`;
    const common = { ...standalone, service: 'datastore' };
    const create: Route = {
      ...common,
      key: `datastore/create${c.suffix}`,
      label: `datastore, POST create${c.suffix}`,
      url: `${base}/book`,
      body: JSON.stringify({ title: 'Dune', author: 'Frank Herbert', year: 1965, tags: ['classic', 'sf'] }),
      headers: json,
      accept: (text: string) => text.includes('"id"'),
    };
    // Queries read a type of their own, seeded once, so the creates do not change what they read.
    const query: Route = {
      ...common,
      key: `datastore/query${c.suffix}`,
      label: `datastore, GET query${c.suffix}`,
      url: `${base}/shelf?where[year][gte]=1960&order=-year&limit=10`,
      method: 'GET',
      headers: {},
      accept: (text: string) => text.includes('"year"'),
    };
    // [storage] and [server] from the environment (DB_<SECTION>_<KEY>), the shipped defaults otherwise (SQLite).
    const s = await serve(c, {
      name: 'datastore',
      config: 'configs/datastore.toml',
      env: {
        DB_SERVER_PORT: String(port),
        DB_METRICS_PORT: String(metrics),
        DB_STORAGE_PATH: join(c.logDir, `datastore${c.suffix}.db`),
        DB_LOGGING_LEVEL: 'warn',
      },
      first: create,
    });
    for (let i = 0; i < 100; i++) {
      await verify({ ...create, url: `${base}/shelf`, body: JSON.stringify({ title: `book ${i}`, year: 1900 + i }) });
    }
    await verify(query);
    return running(s, create, query);
  },
};

const ranking: ServiceCase = {
  name: 'ranking',
  families: ['jsonrpc'],
  async start(c) {
    const { port, sets } = await ports(['metrics']);
    const base = `http://127.0.0.1:${port}`;
    const entity = (name: string) => ({
      key: 'entity',
      url: `${base}/entities/`,
      body: JSON.stringify({ name, description: `bench item ${name}` }),
      headers: json,
    });
    const compare: Route = {
      ...standalone,
      service: 'ranking',
      key: `ranking/compare${c.suffix}`,
      label: `ranking, POST /comparisons${c.suffix}`,
      url: `${base}/comparisons/`,
      headers: json,
      accept: (text: string) => text.includes('"id"'),
    };
    const s = await serve(c, {
      name: 'ranking',
      config: 'configs/ranking.yaml',
      sets,
      env: { AUTH_ENABLED: 'false', RANK_DB_PATH: join(c.logDir, `ranking${c.suffix}.db`) },
      first: { ...compare, ...entity('a'), accept: () => true },
    });
    const ids: number[] = [];
    for (const name of ['b', 'c']) ids.push((JSON.parse((await ask(entity(name))).text) as { id: number }).id);
    compare.body = JSON.stringify({ entity1_id: ids[0], entity2_id: ids[1], selected_entity_id: ids[0] });
    await verify(compare);
    return running(s, compare);
  },
};

const embedding: ServiceCase = {
  name: 'embedding',
  families: ['jsonrpc'],
  async start(c) {
    // The shipped default model (BGESmallENV15, preloaded) in its exact shape, random weights.
    ensureModel('BGESmallENV15');
    const { port, sets } = await ports(['metrics', 'admin']);
    const embed: Route = {
      ...standalone,
      service: 'embedding',
      key: `embedding/embed${c.suffix}`,
      label: `embedding, POST /v1/embed one text${c.suffix}`,
      url: `http://127.0.0.1:${port}/v1/embed`,
      body: JSON.stringify({ text: ['The quick brown fox jumps over the lazy dog.'] }),
      headers: json,
      accept: (text: string) => text.startsWith('[[') || text.includes('"embeddings"'),
    };
    const s = await serve(c, {
      name: 'embedding',
      config: 'configs/embedding.yaml',
      sets,
      env: { EMBED_MODELS_DIR: benchModelsDir },
      first: embed,
    });
    return running(s, embed);
  },
};

export const SERVICES: ServiceCase[] = [typedProxy, safetyFilter, registry, datastore, ranking, embedding];
