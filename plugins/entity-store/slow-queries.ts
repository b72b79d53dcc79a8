/**
 * The slow-query log: every query slower than the threshold is written as one JSON line
 * (`timestamp`, `level`, `target: "slow_query"`, `message`, `entity`, `shape`, `duration_ms`,
 * `rows_returned`, `request_id`) to its own file, or to the service logger when no file is set;
 * and kept, grouped by query shape, for `slow-queries --limit N`.
 */
import { createWriteStream, mkdirSync, type WriteStream } from 'node:fs';
import { dirname } from 'node:path';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { QueryEvent } from '../../runtime/index.ts';
import type { SlowQueries } from './api.ts';

/** Distinct shapes remembered; the least recently seen one is forgotten beyond this. */
const MAX_SHAPES = 1000;

interface ShapeStats {
  shape: string;
  entity: string;
  count: number;
  sumMs: number;
  maxMs: number;
  lastAt: number;
}

export interface SlowQueryLogOptions {
  enabled: boolean;
  thresholdMs: number;
  /** Absolute path of the log file; undefined: the service logger. */
  file?: string;
  logger: Logger;
}

export class SlowQueryLog {
  private readonly shapes = new LRUCache<string, ShapeStats>({ max: MAX_SHAPES });
  private readonly out: WriteStream | undefined;

  constructor(private readonly options: SlowQueryLogOptions) {
    if (options.enabled && options.file) {
      mkdirSync(dirname(options.file), { recursive: true });
      this.out = createWriteStream(options.file, { flags: 'a' });
      // A full disk or a removed directory must not crash the process: report it once, go on.
      this.out.once('error', (err) => options.logger.error({ err, file: options.file }, 'slow-query log unwritable'));
    }
  }

  get thresholdMs(): number {
    return this.options.thresholdMs;
  }

  /** Records the query when it is over the threshold. */
  observe(event: QueryEvent): void {
    if (!this.options.enabled || event.durationMs < this.options.thresholdMs) return;
    const now = Date.now();
    const s = this.shapes.get(event.shape) ?? {
      shape: event.shape,
      entity: event.type,
      count: 0,
      sumMs: 0,
      maxMs: 0,
      lastAt: now,
    };
    s.count++;
    s.sumMs += event.durationMs;
    s.maxMs = Math.max(s.maxMs, event.durationMs);
    s.lastAt = now;
    this.shapes.set(event.shape, s);
    this.write(event, now);
  }

  private write(event: QueryEvent, at: number): void {
    const fields = {
      target: 'slow_query',
      entity: event.type,
      shape: event.shape,
      duration_ms: Math.round(event.durationMs * 1000) / 1000,
      rows_returned: event.rowsReturned,
      request_id: event.requestId ?? null,
    };
    const message = `slow query: ${event.shape} took ${fields.duration_ms} ms`;
    if (!this.out) {
      this.options.logger.warn(fields, message);
      return;
    }
    if (this.out.writable) {
      const line = { timestamp: new Date(at).toISOString(), level: 'warn', message, ...fields };
      this.out.write(`${JSON.stringify(line)}\n`);
    }
  }

  report(limit = 10): SlowQueries {
    const queries = [...this.shapes.values()]
      .sort((a, b) => b.maxMs - a.maxMs || b.count - a.count)
      .slice(0, Math.max(0, limit))
      .map((s) => ({
        shape: s.shape,
        entity: s.entity,
        count: s.count,
        avg_ms: Math.round((s.sumMs / s.count) * 1000) / 1000,
        max_ms: Math.round(s.maxMs * 1000) / 1000,
        last_at: new Date(s.lastAt).toISOString(),
      }));
    return { threshold_ms: this.options.thresholdMs, queries };
  }

  close(): Promise<void> {
    const out = this.out;
    if (!out || out.closed) return Promise.resolve();
    return new Promise((resolve) => out.end(resolve));
  }
}
