/**
 * The idle memory trim: once a service has had no request for `limits.idle_trim_ms` and its
 * resident memory is at least `limits.idle_trim_growth_mb` above its reference (the lowest idle
 * RSS seen since it started or last trimmed), it asks V8 for a full garbage collection (a second
 * one when the first leaves much external memory), then lets the stages and resources that keep
 * worker threads trim too (`trimMemory()`: e.g. the embedding session workers collect their own
 * heaps). RSS, not the heap's size, is the trigger: the heap
 * counts garbage too (the start's own garbage made a heap-based reference miss a burst's growth),
 * and what an operator watches is RSS.
 *
 * Why: V8 collects when allocations ask for it, not when the process goes idle, so after a burst
 * the garbage of the burst stays resident as long as the service stays quiet (measured on the
 * embedding service: RSS 220 MB over the baseline a minute after 24 pages of 1 MB, returned by
 * one collection). A collection costs time on the event loop: it never runs while a request is
 * in flight and runs at most once per idle period. It holds the loop for as long as V8 takes to
 * mark the live heap (V8's `execution: 'async'` only defers it to a task, and offers no
 * incremental collection from JS): 27-60 ms on a lightly loaded 2-core machine after 24 pages of
 * 1 MB, up to 150 ms when the machine is saturated, under 10 ms after a small burst. A request arriving
 * just then waits that long, once, after the service was idle for `idle_trim_ms`; each pause is in
 * `switchyard_memory_trim_pause_seconds`.
 *
 * A second collection only when it pays: what the first one's finalizers let go (the buffers
 * of native wrappers, e.g. onnxruntime tensors) is returned only by another one. After 24 batches
 * of /v1/embed the first left external memory 17-23 MB above its idle floor and the second
 * returned it (RSS 10-25 MB lower); after 24 pages of 1 MB it would free 0.2 MB of heap for
 * another full pause, so it runs only while external memory is still `secondGcExternalBytes`
 * above the lowest idle level seen, and the service is still idle.
 */
import type { Logger } from 'pino';
import type { MetricsKit } from '../observability/metrics.ts';
import { garbageCollector } from '../util/collect-garbage.ts';
import type { ServiceGraph } from './graph.ts';

export interface IdleTrimSettings {
  /** Idle time before a trim; 0 turns the trim off. */
  idleMs: number;
  /** Growth of RSS over the reference that makes a trim worthwhile. */
  growthBytes: number;
}

export interface IdleTrimHooks {
  /** The current settings (they follow hot reloads). */
  settings(): IdleTrimSettings;
  /** True while a request, a response body or an upgraded connection is open. */
  busy(): boolean;
  /** Requests seen so far (a count the runtime bumps per request): a change means not idle. */
  requestsSeen(): number;
  /** `trimMemory()` of the current stages and resources. */
  trimTargets(): Array<{ name: string; trim: () => unknown }>;
}

export interface IdleTrim {
  stop(): void;
}

/** External memory still above its idle floor after the first collection that is worth a second one. */
const secondGcExternalBytes = 8 * 2 ** 20;

/** How often idleness and growth are checked at most (ms). */
const maxCheckMs = 1000;

export function startIdleTrim(hooks: IdleTrimHooks, metrics: MetricsKit, logger: Logger): IdleTrim {
  const trims = metrics.counter({
    name: 'switchyard_memory_trims_total',
    help: 'Idle memory trims: full garbage collections asked for after the service went idle with a grown heap',
  });
  const freed = metrics.counter({
    name: 'switchyard_memory_trim_freed_bytes_total',
    help: 'Main-thread heap and external memory the idle trims returned',
  });
  const pause = metrics.histogram({
    name: 'switchyard_memory_trim_pause_seconds',
    help: 'How long each idle trim held the event loop in its garbage collection',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  });
  const gc = garbageCollector();
  metrics.gauge({
    name: 'switchyard_memory_trim_available',
    help: '1 when the idle trim can ask V8 for a collection (0: this Node does not allow it)',
    collect() {
      this.set(gc ? 1 : 0);
    },
  });
  const used = () => {
    const m = process.memoryUsage();
    return m.heapUsed + m.external;
  };
  const rss = () => process.memoryUsage.rss();
  let reference = rss();
  let externalFloor = process.memoryUsage().external;
  let seen = hooks.requestsSeen();
  let lastActivity = performance.now();
  let trimmedThisIdle = false;
  let running: Promise<boolean> | undefined;

  const trim = async (rssBefore: number): Promise<boolean> => {
    const started = performance.now();
    const before = used();
    const gcMs: number[] = [];
    const collect = async (collector: NonNullable<typeof gc>) => {
      const t = performance.now();
      await collector({ type: 'major', execution: 'async' });
      const ms = performance.now() - t;
      gcMs.push(Math.round(ms));
      pause.observe(ms / 1000);
    };
    const stillIdle = () => !hooks.busy() && hooks.requestsSeen() === seen;
    try {
      if (gc) {
        await collect(gc);
        await new Promise((r) => setTimeout(r, 0));
        const external = process.memoryUsage().external;
        if (external - externalFloor >= secondGcExternalBytes && stillIdle()) await collect(gc);
      }
      for (const target of hooks.trimTargets()) {
        try {
          await target.trim();
        } catch (err) {
          logger.warn({ target: target.name, err: (err as Error).message }, 'memory trim: a target failed');
        }
      }
    } catch (err) {
      logger.warn({ err: (err as Error).message }, 'memory trim failed');
      return false;
    }
    const after = used();
    const rssAfter = rss();
    reference = rssAfter;
    externalFloor = process.memoryUsage().external;
    trims.inc();
    freed.inc(Math.max(0, before - after));
    logger.info(
      {
        heap_external_mb: [mb(before), mb(after)],
        rss_mb: [mb(rssBefore), mb(rssAfter)],
        ms: Math.round(performance.now() - started),
        gc_ms: gcMs,
      },
      'idle memory trim',
    );
    return true;
  };

  const check = (): Promise<boolean> => {
    if (running) return running;
    const { idleMs, growthBytes } = hooks.settings();
    const now = performance.now();
    const count = hooks.requestsSeen();
    if (count !== seen || hooks.busy()) {
      seen = count;
      lastActivity = now;
      trimmedThisIdle = false;
      return Promise.resolve(false);
    }
    if (idleMs <= 0 || trimmedThisIdle || now - lastActivity < idleMs) return Promise.resolve(false);
    const current = rss();
    reference = Math.min(reference, current);
    externalFloor = Math.min(externalFloor, process.memoryUsage().external);
    if (current - reference < growthBytes) return Promise.resolve(false);
    trimmedThisIdle = true;
    running = trim(current).finally(() => {
      running = undefined;
    });
    return running;
  };

  const period = () => Math.max(50, Math.min(maxCheckMs, hooks.settings().idleMs / 4 || maxCheckMs));
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      void check().finally(schedule);
    }, period());
    timer.unref();
  };
  schedule();
  return {
    stop: () => {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** The trim's settings from a graph's `limits` (they follow hot reloads: read them per check). */
export function idleTrimSettings(graph: ServiceGraph): IdleTrimSettings {
  const { idle_trim_ms, idle_trim_growth_mb } = graph.loaded.config.limits;
  return { idleMs: idle_trim_ms, growthBytes: idle_trim_growth_mb * 2 ** 20 };
}

/** `trimMemory()` of a graph's resources and stages that have one, resources first. */
export function trimTargetsOf(graph: ServiceGraph): Array<{ name: string; trim: () => unknown }> {
  const targets: Array<{ name: string; trim: () => unknown }> = [];
  for (const [name, r] of graph.resources) if (r.trimMemory) targets.push({ name, trim: () => r.trimMemory?.() });
  for (const s of graph.stages) {
    if (s.instance.trimMemory) targets.push({ name: s.id, trim: () => s.instance.trimMemory?.() });
  }
  return targets;
}

function mb(bytes: number): number {
  return Math.round(bytes / 2 ** 20);
}
