/**
 * Reading a V8 CPU profile (`node --cpu-prof`) of a target: only the samples inside the measured
 * windows count (the profile's clock and process.hrtime are both CLOCK_MONOTONIC), and each busy
 * sample is charged to the nearest project frame on its stack (runtime/, plugins/, lib/, bench/, or
 * the same under dist/), so that time spent in Node, undici or Koa on a stage's behalf shows under
 * that stage. Positions are mapped back to the .ts sources: in the compiled build through tsc's
 * source maps, in the sources by re-running the transform tsx applies (esbuild, whitespace
 * minified, so the profile itself only knows line 1 and a column).
 */
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface Hotspot {
  /** `file:line function` for project code, else the library or Node module the time went to. */
  where: string;
  usPerRequest: number;
  share: number;
}

export interface ProfileReport {
  /** Sampled busy time per request: wall time while not idle, so preemption by other processes counts too. */
  busyUsPerRequest: number;
  /** Measured CPU per request over the same windows; hotspots' µs are their share of it. */
  cpuUsPerRequest: number;
  hotspots: Hotspot[];
}

/**
 * Windows are [start, end] in process.hrtime nanoseconds; `cpuUs` is the process's measured CPU
 * time over them. The sampler sees wall time (a preempted thread still shows its stack), so
 * shares come from the profile and absolute figures from the CPU counters.
 */
export async function analyseProfile(
  file: string,
  windows: Array<[bigint, bigint]>,
  requests: number,
  cpuUs: number,
  root: string,
): Promise<ProfileReport> {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const inWindow = (us: number) => windows.some(([a, b]) => us * 1000 >= Number(a) && us * 1000 <= Number(b));
  const rootUrl = `file://${root.endsWith('/') ? root : `${root}/`}`;
  // The sources (through tsx) or the compiled build (dist/, mapped back to its sources).
  const project = new RegExp(`^${escapeRegExp(rootUrl)}(dist/)?(runtime|plugins|lib|bench)/`);

  const charged = new Map<string, number>();
  let busy = 0;
  let t = p.startTime;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i];
    const next = i + 1 < p.samples.length ? t + p.timeDeltas[i + 1] : p.endTime;
    if (!inWindow(t)) continue;
    const leaf = byId.get(p.samples[i])!;
    if (leaf.callFrame.functionName === '(idle)') continue;
    const d = next - t;
    busy += d;
    let id: number | undefined = leaf.id;
    let own: ProfileNode | undefined;
    while (id !== undefined) {
      const n = byId.get(id)!;
      if (project.test(n.callFrame.url)) {
        own = n;
        break;
      }
      id = parent.get(id);
    }
    const key = own
      ? `${own.callFrame.url}|${own.callFrame.lineNumber}|${own.callFrame.columnNumber}|${own.callFrame.functionName}`
      : outside(leaf.callFrame);
    charged.set(key, (charged.get(key) ?? 0) + d);
  }

  const mapper = await sourceMapper();
  const merged = new Map<string, number>();
  for (const [key, us] of charged) {
    let where = key;
    if (key.includes('|')) {
      const [url, line, col, fn] = key.split('|');
      const path = fileURLToPath(url);
      const mapped = mapper?.(path, Number(line), Number(col));
      const file = (mapped?.file ?? path).slice(root.length).replace(/^\//, '');
      where = `${file}:${mapped?.line ?? `${Number(line) + 1}:${Number(col) + 1}`} ${fn || '(anonymous)'}`;
    }
    merged.set(where, (merged.get(where) ?? 0) + us);
  }
  const hotspots = [...merged]
    .sort((a, b) => b[1] - a[1])
    .map(([where, us]) => {
      const share = busy ? us / busy : 0;
      return { where, usPerRequest: (share * cpuUs) / requests, share };
    });
  return { busyUsPerRequest: busy / requests, cpuUsPerRequest: cpuUs / requests, hotspots };
}

/** A profile's time per request in the groups of docs/performance.md ("What the goals would take"). */
export interface Components {
  /** Group → µs per request (the report's `usPerRequest` scale: measured CPU, else sampled busy time). */
  groups: Record<ComponentGroup, number>;
  /** Each project directory's µs (runtime/server, plugins/policy, bench/…), largest first. */
  directories: Array<[string, number]>;
}

export type ComponentGroup = 'node, undici, V8' | 'bench code' | 'runtime' | 'classifiers' | 'limits' | 'other stages';

/**
 * Sums a report's hotspots by what they belong to: time outside project frames (Node, libraries,
 * V8), the runtime, the classifier plugin, the rate and token limits, the other plugins, and code
 * of bench/ (a floor's own middleware). What a goal needs is read off these (which must become how
 * much cheaper), not off single functions.
 */
export function components(report: ProfileReport): Components {
  const scale = report.cpuUsPerRequest > 0 ? report.cpuUsPerRequest : report.busyUsPerRequest;
  const groups: Record<ComponentGroup, number> = {
    'node, undici, V8': 0,
    'bench code': 0,
    runtime: 0,
    classifiers: 0,
    limits: 0,
    'other stages': 0,
  };
  const directories = new Map<string, number>();
  for (const h of report.hotspots) {
    const us = h.share * scale;
    const dir = /^((?:runtime|plugins|lib|bench)\/[\w-]+)/.exec(h.where)?.[1];
    if (dir === undefined) {
      groups['node, undici, V8'] += us;
      continue;
    }
    directories.set(dir, (directories.get(dir) ?? 0) + us);
    const group: ComponentGroup = dir.startsWith('bench/')
      ? 'bench code'
      : dir.startsWith('plugins/classify')
        ? 'classifiers'
        : dir === 'plugins/rate-limit'
          ? 'limits'
          : dir.startsWith('plugins/')
            ? 'other stages'
            : 'runtime';
    groups[group] += us;
  }
  return { groups, directories: [...directories].sort((a, b) => b[1] - a[1]) };
}

/** Lines for a console: each group's µs and share, then the largest project directories. */
export function componentLines(report: ProfileReport, directories = 12): string[] {
  const { groups, directories: dirs } = components(report);
  const total = Object.values(groups).reduce((s, v) => s + v, 0);
  const lines = Object.entries(groups)
    .filter(([, us]) => us > 0)
    .map(([g, us]) => `${us.toFixed(1).padStart(7)} µs  ${((100 * us) / (total || 1)).toFixed(1).padStart(5)}%  ${g}`);
  lines.push(`${total.toFixed(1).padStart(7)} µs          in all`);
  for (const [dir, us] of dirs.slice(0, directories)) lines.push(`${us.toFixed(1).padStart(7)} µs          ${dir}`);
  return lines;
}

/** Where time outside project code went: the package or Node module, or V8's own bucket. */
function outside(f: CallFrame): string {
  if (!f.url) return `[${f.functionName || 'native'}]`;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(f.url);
  if (pkg) return `[${pkg[1]}]`;
  if (f.url.startsWith('node:')) return `[${f.url.split('/').slice(0, 3).join('/')}]`;
  return `[${f.url}]`;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

type Mapper = (path: string, line: number, col: number) => { file?: string; line: number } | undefined;

/**
 * Maps a position back to its source file and line: in the compiled build through the source map
 * tsc wrote beside each file, in the sources through the transform tsx applies (undefined without
 * esbuild, tsx's own dependency).
 */
async function sourceMapper(): Promise<Mapper | undefined> {
  const tsx = await tsxMapper();
  const built = new Map<string, SourceMap | undefined>();
  return (path, line, col) => {
    if (!/\/dist\/.*\.js$/.test(path)) {
      const original = tsx?.(path, line, col);
      return original === undefined ? undefined : { line: original };
    }
    if (!built.has(path)) {
      try {
        built.set(path, new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8'))));
      } catch {
        built.set(path, undefined);
      }
    }
    const entry = built.get(path)?.findEntry(line, col) as
      | { originalSource?: string; originalLine?: number }
      | undefined;
    if (entry?.originalLine === undefined) return undefined;
    const file = entry.originalSource
      ? resolve(dirname(path), entry.originalSource.replace(/^file:\/\//, ''))
      : undefined;
    return { file, line: entry.originalLine + 1 };
  };
}

async function tsxMapper(): Promise<((path: string, line: number, col: number) => number | undefined) | undefined> {
  let transformSync: ((src: string, o: Record<string, unknown>) => { map: string }) | undefined;
  try {
    const esbuild = (await import('esbuild' as string)) as { transformSync: typeof transformSync };
    transformSync = esbuild.transformSync;
  } catch {
    return undefined;
  }
  const maps = new Map<string, SourceMap | undefined>();
  return (path, line, col) => {
    if (!maps.has(path)) {
      try {
        // The options tsx uses for its ESM loader, so that columns line up.
        const out = transformSync!(readFileSync(path, 'utf8'), {
          loader: 'ts',
          format: 'esm',
          target: `node${process.versions.node}`,
          sourcemap: true,
          minifyWhitespace: true,
          keepNames: true,
          sourcefile: path,
        });
        maps.set(path, new SourceMap(JSON.parse(out.map)));
      } catch {
        maps.set(path, undefined);
      }
    }
    const entry = maps.get(path)?.findEntry(line, col) as { originalLine?: number } | undefined;
    return entry?.originalLine === undefined ? undefined : entry.originalLine + 1;
  };
}
