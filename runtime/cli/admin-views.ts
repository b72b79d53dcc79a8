/**
 * How `switchyard admin` shows each answer of the ops-api endpoints (see plugins/ops-api) to a
 * person. The shapes are the endpoints' JSON; a missing figure shows as `-`.
 */
import { count, humanBytes, humanDuration, humanSeconds, ms, percent, renderPairs, renderTable } from './table.ts';

type Nullable<T> = { [K in keyof T]: T[K] | null | undefined };

interface Status {
  version: string;
  uptime_seconds: number;
  connections: { active: number; max: number | null };
  memory: Nullable<{ rss_bytes: number; heap_used_bytes: number; heap_total_bytes: number }>;
  cpu: Nullable<{ user_seconds: number; system_seconds: number; percent: number }>;
}

interface Connections {
  active: number;
  max: number | null;
  connections: Array<{
    client: string;
    connected_at: string;
    requests: number;
    in_flight: number;
    duration_ms: number;
  }>;
}

interface QueryStats {
  window_seconds: number;
  total: number;
  errors: number;
  avg_ms: number | null;
  p50_ms: number | null;
  p95_ms: number | null;
  p99_ms: number | null;
  top_entities?: Array<{ entity: string; queries: number }>;
}

type StorageStats = Nullable<{
  data_bytes: number;
  index_bytes: number;
  wal_bytes: number;
  free_bytes: number;
  cache_hits: number;
  cache_misses: number;
  cache_hit_ratio: number;
}>;

interface SlowQueries {
  threshold_ms: number;
  queries: Array<{ shape: string; entity: string; count: number; avg_ms: number; max_ms: number; last_at: string }>;
}

export function statusView(s: Status): string {
  const cpu = s.cpu ?? {};
  const mem = s.memory ?? {};
  return renderPairs([
    ['version', s.version],
    ['uptime', humanSeconds(s.uptime_seconds)],
    ['connections', `${s.connections.active} / ${count(s.connections.max)}`],
    ['memory', `${humanBytes(mem.rss_bytes)} resident`],
    ['heap', `${humanBytes(mem.heap_used_bytes)} used of ${humanBytes(mem.heap_total_bytes)}`],
    [
      'cpu',
      `${cpu.percent === null || cpu.percent === undefined ? '-' : `${cpu.percent.toFixed(1)}%`}` +
        ` (user ${secs(cpu.user_seconds)}, system ${secs(cpu.system_seconds)})`,
    ],
  ]);
}

export function connectionsView(c: Connections): string {
  const head = `${c.active} / ${count(c.max)} connections`;
  if (c.connections.length === 0) return head;
  const table = renderTable(
    [
      { title: 'CLIENT' },
      { title: 'CONNECTED' },
      { title: 'REQUESTS', align: 'right' },
      { title: 'IN FLIGHT', align: 'right' },
      { title: 'DURATION', align: 'right' },
    ],
    c.connections.map((x) => [
      x.client,
      x.connected_at,
      String(x.requests),
      String(x.in_flight),
      humanDuration(x.duration_ms),
    ]),
  );
  return `${head}\n\n${table}`;
}

export function queryStatsView(q: QueryStats): string {
  const errorShare = q.total > 0 ? ` (${percent(q.errors / q.total)})` : '';
  const pairs = renderPairs([
    ['window', `last ${humanSeconds(q.window_seconds)}`],
    ['queries', String(q.total)],
    ['errors', `${q.errors}${errorShare}`],
    ['avg', ms(q.avg_ms)],
    ['p50', ms(q.p50_ms)],
    ['p95', ms(q.p95_ms)],
    ['p99', ms(q.p99_ms)],
  ]);
  const top = q.top_entities ?? [];
  if (top.length === 0) return pairs;
  const table = renderTable(
    [{ title: 'ENTITY' }, { title: 'QUERIES', align: 'right' }, { title: 'SHARE', align: 'right' }],
    top.map((e) => [e.entity, String(e.queries), q.total > 0 ? percent(e.queries / q.total) : '-']),
  );
  return `${pairs}\n\n${table}`;
}

export function storageStatsView(s: StorageStats): string {
  return renderPairs([
    ['data', humanBytes(s.data_bytes)],
    ['index', humanBytes(s.index_bytes)],
    ['wal', humanBytes(s.wal_bytes)],
    ['free', humanBytes(s.free_bytes)],
    ['cache hit', `${percent(s.cache_hit_ratio)} (${count(s.cache_hits)} hits, ${count(s.cache_misses)} misses)`],
  ]);
}

export function slowQueriesView(s: SlowQueries): string {
  if (s.queries.length === 0) return `no queries slower than ${s.threshold_ms} ms`;
  const table = renderTable(
    [
      { title: 'SHAPE' },
      { title: 'ENTITY' },
      { title: 'COUNT', align: 'right' },
      { title: 'AVG', align: 'right' },
      { title: 'MAX', align: 'right' },
      { title: 'LAST' },
    ],
    s.queries.map((q) => [q.shape, q.entity, String(q.count), ms(q.avg_ms), ms(q.max_ms), q.last_at]),
  );
  return `queries slower than ${s.threshold_ms} ms\n\n${table}`;
}

function secs(value: number | null | undefined): string {
  return value === null || value === undefined ? '-' : `${value.toFixed(2)} s`;
}
