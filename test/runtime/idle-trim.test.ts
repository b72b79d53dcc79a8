/**
 * The idle memory trim (runtime/service/idle-trim.ts) and the way it obtains V8's `gc` without
 * `--expose-gc` (runtime/util/collect-garbage.ts). The whole service is measured in
 * test/services/memory-after-burst.test.ts; here, when a trim runs: never while busy or while
 * requests keep coming, once per idle period, only after growth.
 */
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createMetricsKit } from '../../runtime/observability/metrics.ts';
import { type IdleTrimHooks, startIdleTrim } from '../../runtime/service/idle-trim.ts';
import { garbageCollector } from '../../runtime/util/collect-garbage.ts';
import { sample } from '../helpers/prometheus.ts';
import { until } from '../helpers/servers.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('garbageCollector', () => {
  it('collects without --expose-gc, and leaves no gc global in this context or new ones', () => {
    expect(process.execArgv).not.toContain('--expose-gc');
    const gc = garbageCollector();
    expect(typeof gc).toBe('function');
    let junk: unknown[] | null = Array.from({ length: 200_000 }, (_, i) => ({ i, s: `x${i}` }));
    expect(junk.length).toBe(200_000);
    junk = null;
    const before = process.memoryUsage().heapUsed;
    gc?.();
    expect(process.memoryUsage().heapUsed).toBeLessThan(before);
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    expect(runInNewContext('typeof gc')).toBe('undefined');
  });
});

describe('startIdleTrim', () => {
  function setup() {
    const state = { busy: false, requests: 0, idleMs: 40, growthBytes: 1, trimmed: 0 };
    const hooks: IdleTrimHooks = {
      settings: () => ({ idleMs: state.idleMs, growthBytes: state.growthBytes }),
      busy: () => state.busy,
      requestsSeen: () => state.requests,
      trimTargets: () => [{ name: 'workers', trim: () => void state.trimmed++ }],
    };
    const metrics = createMetricsKit();
    const trim = startIdleTrim(hooks, metrics, silentLogger);
    const trims = async () => sample(await metrics.registry.metrics(), 'switchyard_memory_trims_total') ?? 0;
    const pauses = async () =>
      sample(await metrics.registry.metrics(), 'switchyard_memory_trim_pause_seconds_count') ?? 0;
    return { state, trim, trims, pauses };
  }
  /** Resident memory grows by touching a fresh buffer (kept until the test ends). */
  const held: Buffer[] = [];
  const grow = () => held.push(Buffer.alloc(16 * 2 ** 20, 1));

  it('trims once the service is idle and has grown, once per idle period, and its targets too', {
    timeout: 60_000,
  }, async () => {
    const { state, trim, trims, pauses } = setup();
    try {
      grow();
      // Waited for, not timed: on a loaded machine the 40 ms idle period can end much later.
      await until(async () => (await trims()) >= 1, 20_000);
      expect(await trims()).toBe(1);
      expect(state.trimmed).toBe(1);
      // Its pauses on record: two collections, as the external memory (the held buffer) is still
      // far above its idle floor after the first.
      expect(await pauses()).toBe(2);
      // Still the same idle period: no second trim, even after more growth.
      grow();
      await sleep(150);
      expect(await trims()).toBe(1);
      // A request came and went: a new idle period, and a trim after it.
      state.requests++;
      grow();
      await until(async () => (await trims()) >= 2, 20_000);
      expect(await trims()).toBe(2);
    } finally {
      trim.stop();
    }
  });

  it('never trims while a request is in flight, or when idle_trim_ms is 0, or without growth', async () => {
    const { state, trim, trims } = setup();
    try {
      state.busy = true;
      grow();
      await sleep(150);
      state.idleMs = 0;
      state.busy = false;
      await sleep(1200);
      state.growthBytes = 2 ** 40;
      state.idleMs = 40;
      await sleep(1200);
      expect(await trims()).toBe(0);
      expect(state.trimmed).toBe(0);
    } finally {
      trim.stop();
    }
  });
});
