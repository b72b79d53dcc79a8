/**
 * Counted work of a server in the test process: the async resources (promises, timers, ticks,
 * sockets, HTTP parsers...) it creates while a client sends requests, by type. Deterministic where
 * a time or an instruction count is not: the same request creates the same resources whatever
 * the machine's load (docs/performance.md, "Work per request").
 *
 * What is counted is the requests' own work: resources created (transitively) from the context of
 * a socket to the measured server or from it to its upstream. Left out:
 * - the client's: it runs in the test process too, in an AsyncLocalStorage context of its own
 *   that every resource it creates (its sockets, their reads, its promises) inherits;
 * - background work that runs during the window but is not caused by it: timers set before the
 *   window (upstream health checks, the idle trim), garbage-collection observers, the test
 *   runner's own messages, another server's idle connections closing (anything rooted elsewhere);
 * - clocks: Node's Date header cache and undici's coarse timer tick, timers made at most once per
 *   wall-clock tick by whatever request comes first;
 * - RANDOMBYTESREQUEST: a random pool's refill every few hundred requests (amortized, reported).
 * An upstream runs in a child process, so none of its work is in the count.
 */
import { AsyncLocalStorage, createHook, executionAsyncId, executionAsyncResource } from 'node:async_hooks';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { Pool } from 'undici';
import { koaFloor } from '../../bench/typed-proxy/koa-floor.ts';

const client = new AsyncLocalStorage<true>();

/** The local and remote port of a socket's handle (TCP), or of an incoming request's socket. */
function ports(resource: unknown): number[] {
  const handle =
    resource?.constructor?.name === 'HTTPServerAsyncResource'
      ? (resource as { socket?: { _handle?: unknown } }).socket?._handle
      : resource?.constructor?.name === 'TCP'
        ? resource
        : undefined;
  if (!handle) return [];
  const h = handle as { getsockname(o: object): number; getpeername(o: object): number };
  const local: { port?: number } = {};
  const remote: { port?: number } = {};
  h.getsockname(local);
  h.getpeername(remote);
  return [local.port, remote.port].filter((p): p is number => p !== undefined);
}

/** Timers made once per wall-clock tick (Node's Date header cache, undici's fast-timer clock). */
const clocks = new Set(['resetCache', 'onTick']);
const amortized = new Set(['RANDOMBYTESREQUEST']);

/** A window's resources: the requests' own by type, and what was left out, by reason and type. */
export interface Work {
  byType: Map<string, number>;
  leftOut: Map<string, number>;
  /** With `stacks`: how often each creation stack of the requests' own resources was seen. */
  stacks: Map<string, number>;
}

const add = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n);

/**
 * Counts the async resources the servers `fn` talks to create while it runs (see above): the
 * work rooted in a socket one end of which is on one of `ports` (the server's listener, its
 * upstream's). With
 * `stacks`, each creation's stack is kept (`stackLines` frames outside Node's async plumbing),
 * for finding where they come from.
 */
export function countWork(
  fn: () => Promise<void>,
  o: { ports: number[]; stacks?: boolean; stackLines?: number },
): Promise<Work> {
  const work: Work = { byType: new Map(), leftOut: new Map(), stacks: new Map() };
  /** Each context's origin: true when it is a request's work. */
  const origin = new Map<number, boolean>();
  const hook = createHook({
    init(id, type, _trigger, resource) {
      if (client.getStore()) return;
      const current = executionAsyncId();
      let ours = origin.get(current);
      if (ours === undefined) {
        ours = current !== 0 && ports(executionAsyncResource()).some((p) => o.ports.includes(p));
        origin.set(current, ours);
      }
      origin.set(id, ours);
      if (!ours) return void add(work.leftOut, `background ${type}`);
      const r = resource as { _onTimeout?: { name?: string }; _onImmediate?: { name?: string } };
      if (type === 'Timeout' && clocks.has(r._onTimeout?.name ?? '')) return void add(work.leftOut, `clock ${type}`);
      if (amortized.has(type)) return void add(work.leftOut, `amortized ${type}`);
      add(work.byType, type);
      if (o.stacks) {
        const stack = (new Error().stack ?? '')
          .split('\n')
          .slice(2)
          .filter((l) => !/\(node:internal\/(async_hooks|process\/task_queues|timers)|AsyncHook\.init/.test(l))
          .slice(0, o.stackLines ?? 12);
        add(work.stacks, `${type}\n${stack.join('\n')}`);
      }
    },
  });
  return client.run(true, async () => {
    // The caller's own `await` of this promise is attached before the hook is on.
    await null;
    const limit = Error.stackTraceLimit;
    if (o.stacks) Error.stackTraceLimit = (o.stackLines ?? 12) + 12;
    hook.enable();
    try {
      await fn();
    } finally {
      hook.disable();
      Error.stackTraceLimit = limit;
    }
    return work;
  });
}

/**
 * A window's stacks (countWork with `stacks`) grouped by type and innermost frame of this project
 * outside node_modules (`file:line`), per request, most first: where the work comes from.
 */
export function byProjectFrame(work: Work, root: string, perRequest: number): Array<[string, number]> {
  const groups = new Map<string, number>();
  for (const [stack, n] of work.stacks) {
    const [type, ...frames] = stack.split('\n');
    const ours = frames.find((f) => f.includes(root) && !f.includes('node_modules'));
    // `    at fn (/root/file.ts:12:5)` or `    at /root/file.ts:12:5`: file:line, relative to root.
    const where = ours ? (/([^\s()]+:\d+):\d+\)?$/.exec(ours)?.[1] ?? ours.trim()).replace(`${root}/`, '') : 'outside';
    add(groups, `${type} ${where}`, n);
  }
  return [...groups].map(([k, n]): [string, number] => [k, n / perRequest]).sort((a, b) => b[1] - a[1]);
}

/** A map's counts as a plain object, keys sorted, each divided by `per`. */
export function divided(m: Map<string, number>, per = 1): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, n] of [...m].sort(([a], [b]) => a.localeCompare(b))) out[k] = n / per;
  return out;
}

/** `b − a` per key (keys of either). */
export function difference(b: Map<string, number>, a: Map<string, number>): Map<string, number> {
  const out = new Map<string, number>();
  for (const k of new Set([...a.keys(), ...b.keys()])) out.set(k, (b.get(k) ?? 0) - (a.get(k) ?? 0));
  return out;
}

/** A keep-alive client of one connection to `origin`, made in the client's context (its work is not counted). */
export function oneConnection(origin: string): Pool {
  return client.run(true, () => new Pool(origin, { connections: 1, pipelining: 1 }));
}

export interface Ask {
  path: string;
  body: string;
  headers: Record<string, string>;
  /** Throws unless the answer is the expected one. */
  check: (status: number, text: string) => void;
}

/** `n` requests one after the other on `pool`, each answer read whole and checked. */
export async function sequential(pool: Pool, ask: Ask, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const res = await pool.request({ method: 'POST', path: ask.path, headers: ask.headers, body: ask.body });
    ask.check(res.statusCode, await res.body.text());
  }
  // What the server does after its last answer is sent (the answer's 'finish', a socket's
  // drain) belongs to that request: let it run inside the window.
  for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
}

/** The bench's JSON-RPC echo upstream (bench/typed-proxy/upstream.ts), in a child process. */
export function startEchoUpstream(): Promise<{ url: string; child: ChildProcess }> {
  return startBenchServer('bench/typed-proxy/upstream.ts', '/');
}

/** The bench's OpenAI-compatible backend (bench/safety-filter/backend.ts), in a child process; `url` ends in /v1. */
export function startChatBackend(): Promise<{ url: string; child: ChildProcess }> {
  return startBenchServer('bench/safety-filter/backend.ts', '/v1');
}

/** A bench server (`listening <port>` once it listens) in a child process. */
async function startBenchServer(path: string, base: string): Promise<{ url: string; child: ChildProcess }> {
  const file = resolve(import.meta.dirname, '../..', path);
  const child = spawn(process.execPath, ['--import', 'tsx', file], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((done, fail) => {
    let seen = '';
    const timer = setTimeout(() => fail(new Error(`${path} did not start: ${seen}`)), 60000);
    child.stdout?.on('data', (d: Buffer) => {
      seen += d.toString();
      const m = /listening (\d+)/.exec(seen);
      if (m) {
        clearTimeout(timer);
        done(Number(m[1]));
      }
    });
    child.once('exit', (code) => fail(new Error(`${path} exited (${code}): ${seen}`)));
  });
  return { url: `http://127.0.0.1:${port}${base}`, child };
}

/**
 * The Koa + undici floor of bench/typed-proxy/bare-proxy.ts with BARE_BUFFER=1 (what `npm run
 * bench` compares the typed proxy with): reads the body, forwards it with a keep-alive pool, reads
 * the answer whole and sends it as a Buffer.
 */
export async function startKoaFloor(upstreamUrl: string): Promise<{ url: string; close: () => Promise<void> }> {
  const { app, pool } = koaFloor(upstreamUrl, true);
  const server: Server = createServer({ keepAlive: true }, app.callback());
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      server.close();
      await pool.destroy();
    },
  };
}
