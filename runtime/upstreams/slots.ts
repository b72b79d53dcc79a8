/**
 * Circuit breaking with separate pending and active bounds (Envoy's max_requests and
 * max_pending_requests), for `http` / `openai` upstreams: at most `max_active` requests under way
 * at once (sent, until their answer's body ends: a streamed answer holds its slot, as it holds its
 * connection), all endpoints together; a request over it waits for a slot in a FIFO queue of at
 * most `max_pending`; one more is refused at once with 503 `unavailable` (Retry-After: 1), never
 * sent, and counted. A wait counts against the request's timeout (then 504, never sent). With
 * `max_pending` alone the slots are the pools' connections (`connections` × endpoints): pending
 * then means waiting for a connection, which undici's pool would queue without a bound.
 * A request holds one slot through its retries (retries are bounded by the retry budget).
 */
import { GatewayError } from '../errors.ts';
import type { MetricsKit } from '../observability/metrics.ts';
import { whenAnswerEnds } from './answer-handler.ts';
import { around } from './around.ts';
import type { HttpForwardRequest, HttpForwardResponse, HttpUpstream } from './types.ts';

export interface SlotBounds {
  maxActive: number;
  /** Infinity: no bound on the count (each waits at most its timeout). */
  maxPending: number;
  /** The upstream's `timeout_ms`: a request's wait and its tries share it. */
  timeoutMs: number;
}

interface Waiter {
  resolve(): void;
  reject(err: Error): void;
}

interface Source {
  readonly name: string;
  active(): number;
  pending(): number;
}

/** The live bounded upstreams of each registry (one per service): the gauges read them at scrape time. */
const live = new WeakMap<object, Set<Source>>();

function register(kit: MetricsKit, source: Source): () => void {
  let sources = live.get(kit.registry);
  if (!sources) {
    const set = new Set<Source>();
    sources = set;
    live.set(kit.registry, set);
    // Summed per name: during a reload the old graph's upstream and its successor may both have requests.
    const gauge = (name: string, help: string, read: (s: Source) => number) =>
      kit.gauge({
        name,
        help,
        labelNames: ['upstream'] as const,
        collect() {
          this.reset();
          for (const s of set) this.inc({ upstream: s.name }, read(s));
        },
      });
    gauge('switchyard_upstream_active_requests', 'Requests under way on an upstream with max_active', (s) =>
      s.active(),
    );
    gauge('switchyard_upstream_pending_requests', 'Requests waiting for a slot of an upstream (max_active)', (s) =>
      s.pending(),
    );
  }
  sources.add(source);
  const registered = sources;
  return () => registered.delete(source);
}

export function slotted<U extends HttpUpstream>(upstream: U, bounds: SlotBounds, metrics?: MetricsKit): U {
  const overflow = metrics?.counter({
    name: 'switchyard_upstream_pending_overflow_total',
    help: 'Requests refused because max_pending requests already waited for a slot of the upstream (max_active)',
    labelNames: ['upstream'] as const,
  });
  const waited = metrics?.counter({
    name: 'switchyard_upstream_pending_total',
    help: 'Requests that waited for a slot of the upstream (max_active) before being sent',
    labelNames: ['upstream'] as const,
  });
  let active = 0;
  const queue: Waiter[] = [];
  const release = () => {
    const next = queue.shift();
    if (next)
      next.resolve(); // the slot passes to the first waiter
    else active--;
  };
  const forget = metrics
    ? register(metrics, { name: upstream.name, active: () => active, pending: () => queue.length })
    : undefined;
  if (forget) {
    around(upstream, {
      close: (close) => () => {
        forget();
        return close();
      },
    });
  }
  return around(upstream, {
    forward:
      (forward) =>
      async (req: HttpForwardRequest): Promise<HttpForwardResponse> => {
        let sent = req;
        if (active < bounds.maxActive) active++;
        else {
          if (queue.length >= bounds.maxPending) {
            overflow?.inc({ upstream: upstream.name });
            throw new GatewayError(
              'unavailable',
              `Upstream "${upstream.name}" has ${queue.length} requests waiting for a slot (max_pending)`,
              {
                details: { upstream: upstream.name, max_active: bounds.maxActive, max_pending: bounds.maxPending },
                headers: { 'Retry-After': '1' },
              },
            );
          }
          waited?.inc({ upstream: upstream.name });
          const timeoutMs = req.timeoutMs ?? bounds.timeoutMs;
          const started = performance.now();
          await waitForSlot(queue, timeoutMs, req.signal, upstream.name);
          sent = { ...req, timeoutMs: Math.max(1, Math.ceil(timeoutMs - (performance.now() - started))) };
        }
        let res: HttpForwardResponse;
        try {
          res = await forward(sent);
        } catch (err) {
          release();
          throw err;
        }
        whenAnswerEnds(res, release);
        return res;
      },
  });
}

function waitForSlot(
  queue: Waiter[],
  timeoutMs: number,
  signal: HttpForwardRequest['signal'],
  name: string,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const leave = (err: Error) => {
      const at = queue.indexOf(waiter);
      if (at !== -1) queue.splice(at, 1);
      done();
      reject(err);
    };
    const onAbort = () => leave(new GatewayError('bad_request', 'Request aborted by the client'));
    const timer = setTimeout(
      () =>
        leave(
          new GatewayError('upstream_timeout', `Upstream had no free slot within ${timeoutMs} ms (max_active)`, {
            details: { upstream: name, timeout_ms: timeoutMs },
          }),
        ),
      timeoutMs,
    );
    const done = () => {
      clearTimeout(timer);
      if (!signal) return;
      if ('removeEventListener' in signal) signal.removeEventListener('abort', onAbort);
      else signal.off('abort', onAbort);
    };
    const waiter: Waiter = {
      resolve: () => {
        done();
        resolve();
      },
      reject: leave,
    };
    queue.push(waiter);
    if (!signal) return;
    if (signal.aborted) return onAbort();
    if ('addEventListener' in signal) signal.addEventListener('abort', onAbort, { once: true });
    else signal.once('abort', onAbort);
  });
}
