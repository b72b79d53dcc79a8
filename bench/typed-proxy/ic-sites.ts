/**
 * Which property-access sites of the typed proxy's request path miss their inline caches: the
 * shipped configs/typed-proxy.yaml started as `npm run bench` starts it (bench/services/cases.ts,
 * the JSON-RPC echo upstream bench/typed-proxy/upstream.ts) under V8's IC log (`--log-ic`), its
 * two main routes sent a warm-up and then IC_N requests each (`tools/call` to `POST /`, the typed
 * send to `POST /mcp`), and the log read back: every IC miss V8 handled in its runtime (LoadIC,
 * KeyedLoadIC, StoreIC, KeyedStoreIC, ...), grouped by source position and function, mapped back
 * to the TypeScript through dist/'s source maps. See bench/README.md ("IC sites").
 *
 *   npx tsx bench/typed-proxy/ic-sites.ts                 # this checkout (builds dist/ first)
 *   IC_CHECKOUT=../other npx tsx bench/typed-proxy/ic-sites.ts   # another checkout (built), same analysis
 *   npx tsx bench/typed-proxy/ic-sites.ts --log <file>    # only parse a log written before (marks unknown: all of it)
 *
 * Env: IC_WARMUP (requests per route before the measured window, 500), IC_N (per route, 3000),
 * IC_ROUTES (typed-proxy/jsonrpc,typed-proxy/send), IC_TOP (rows printed, 40), IC_ALL=1 (rows of
 * node_modules and node: too, not only the project's), IC_LOG (keep the log at this path),
 * BENCH_RUN (dist|source), BENCH_BUILD=0 (dist/ as it is), IC_JSON (write the sites as JSON here),
 * IC_MAPS=1 (also `--log-maps`: each polymorphic site's maps described by their constructor and the
 * properties added to it in order, which tells which objects differ and how; a log ~10× larger).
 *
 * What a row means. V8 logs an IC event each time a property access misses its inline cache and
 * goes to the runtime: a new shape seen (state 0→1 monomorphic, 1→P polymorphic, P→N megamorphic)
 * or, once megamorphic, a miss in the global stub cache (N→N). A site that stays monomorphic logs
 * nothing after its first miss. So the events of the measured window (after the warm-up) are
 * misses paid per request, and a site that reached P or N after the service was ready is one whose
 * objects come in several shapes. `maps` is the number of distinct maps (hidden classes) the site
 * saw; `events/req` the misses per request of the measured window.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { envNum, runBench, startNodeServer } from '../common/harness.ts';
import { fmt, printTable } from '../common/report.ts';
import { type Context, SERVICES, type Subject } from '../services/cases.ts';
import { stop } from './children.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** One IC event as V8 11 writes it: `LoadIC,<pc>,<time>,<line>,<column>,<old>,<new>,<map>,<key>,<modifier>,<slow reason>`. */
const IC_TYPES = new Set([
  'LoadIC',
  'KeyedLoadIC',
  'LoadGlobalIC',
  'StoreIC',
  'KeyedStoreIC',
  'StoreGlobalIC',
  'StoreInArrayLiteralIC',
  'DefineNamedOwnIC',
  'DefineKeyedOwnIC',
]);

interface Code {
  start: number;
  size: number;
  /** The function's name and its script (a path, a file:// URL or node:...). */
  fn: string;
  script: string;
}

export interface Site {
  type: string;
  fn: string;
  /** The generated position (script:line:column, 1-based) and, through a source map, the source's. */
  at: string;
  source?: string;
  origin: 'project' | 'node_modules' | 'node' | 'other';
  key: string;
  /** Final state seen and the states it went through. */
  state: string;
  states: Set<string>;
  maps: Set<string>;
  /** With IC_MAPS=1 (--log-maps): each map the site saw, described (constructor, the properties added from its root map). */
  shapes: Map<string, string>;
  /** Events per segment of the log (between marks). */
  events: number[];
  /** Whether it became polymorphic or megamorphic after the service was ready (segment ≥ 1). */
  wentPolyAfterReady: boolean;
}

/** A deoptimisation (`--log-deopt`): where (the function's position, mapped like a site) and why, per segment. */
export interface Deopt {
  at: string;
  source?: string;
  origin: Site['origin'];
  reason: string;
  kind: string;
  events: number[];
}

/** Parses the log; `marks` are byte offsets that split it into segments (0: before the first mark). */
export function parseIcLog(file: string, marks: number[], deopts = new Map<string, Deopt>()): Map<string, Site> {
  const codes = new Map<number, Code>();
  let sorted: Code[] | undefined;
  const find = (pc: number): Code | undefined => {
    const exact = codes.get(pc);
    if (exact) return exact;
    sorted ??= [...codes.values()].sort((a, b) => a.start - b.start);
    let lo = 0;
    let hi = sorted.length - 1;
    let best: Code | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid].start <= pc) {
        best = sorted[mid];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return best && pc < best.start + best.size ? best : undefined;
  };
  const sites = new Map<string, Site>();
  // --log-maps: how each map was made (its parent and the property added), and its details (type, constructor, dictionary).
  const made = new Map<string, { from: string; how: string; name: string }>();
  const details = new Map<string, string>();
  const describe = (map: string): string => {
    const names: string[] = [];
    let at = map;
    let root = '';
    for (let i = 0; i < 40; i++) {
      const d = details.get(at);
      if (d && /dictionary_map/.test(d)) names.push('<dictionary>');
      const m = made.get(at);
      if (m?.how !== 'Transition') {
        if (m) names.push(`<${m.how}${m.name ? ` ${m.name}` : ''}>`);
        const c = d && /- constructor: \S+ <(\w+(?: \w+)?)/.exec(d);
        const t = d && /- type: (\w+)/.exec(d);
        root = [t?.[1], c?.[1]].filter(Boolean).join(' ');
        break;
      }
      names.push(m.name);
      at = m.from;
    }
    return `${root || '?'} {${names.reverse().join(', ')}}`;
  };
  let offset = 0;
  let segment = 0;
  for (const line of lines(file)) {
    const lineStart = offset;
    offset += line.length + 1;
    while (segment < marks.length && lineStart >= marks[segment]) segment++;
    const comma = line.indexOf(',');
    if (comma < 0) continue;
    const kind = line.slice(0, comma);
    if (kind === 'code-creation') {
      // code-creation,<type>,<kind>,<time>,<addr>,<size>,<name>[,<sfi>,<state>]
      const f = line.split(',');
      const start = Number(f[4]);
      const size = Number(f[5]);
      const name = f[6] ?? '';
      const m = /^(.*?) ?(\S+):(\d+):(\d+)$/.exec(name);
      codes.set(start, { start, size, fn: m ? m[1] || '(anonymous)' : name, script: m ? m[2] : '' });
      sorted = undefined;
      continue;
    }
    if (kind === 'code-move') {
      const f = line.split(',');
      const c = codes.get(Number(f[1]));
      if (c) {
        codes.delete(c.start);
        c.start = Number(f[2]);
        codes.set(c.start, c);
        sorted = undefined;
      }
      continue;
    }
    if (kind === 'code-delete') {
      codes.delete(Number(line.slice(comma + 1)));
      sorted = undefined;
      continue;
    }
    if (kind === 'code-deopt') {
      // code-deopt,<time>,<size>,<code>,<inlining id>,<script offset>,<kind>,<<script:line:column>>,<reason>
      const f = line.split(',');
      const at = (f[7] ?? '').replace(/^<|>$/g, '');
      const reason = f.slice(8).join(',');
      const id = `${at} ${reason}`;
      let d = deopts.get(id);
      if (!d) {
        d = { at, origin: originOf(at), reason, kind: f[6], events: Array.from({ length: marks.length + 1 }, () => 0) };
        deopts.set(id, d);
      }
      d.events[segment]++;
      continue;
    }
    if (kind === 'map') {
      // map,<how>,<time>,<from>,<to>,<pc>,<line>,<column>,<reason>,<name>
      const f = line.split(',');
      made.set(f[4], { from: f[3], how: f[1], name: f.slice(9).join(',') });
      continue;
    }
    if (kind === 'map-details') {
      const f = line.split(',');
      details.set(f[2], f.slice(3).join(','));
      continue;
    }
    if (!IC_TYPES.has(kind)) continue;
    const f = line.split(',');
    const [, pcText, , lineNo, col, oldState, newState, map, key] = f;
    if (newState === 'X') continue; // no feedback vector yet: the function's first runs, no cache involved
    const code = find(Number(pcText));
    const script = code?.script ?? '?';
    const at = `${script}:${lineNo}:${col}`;
    const id = `${kind} ${at} ${key}`;
    let s = sites.get(id);
    if (!s) {
      s = {
        type: kind,
        fn: code?.fn ?? '?',
        at,
        origin: originOf(script),
        key: key ?? '',
        state: newState,
        states: new Set(),
        maps: new Set(),
        shapes: new Map(),
        events: Array.from({ length: marks.length + 1 }, () => 0),
        wentPolyAfterReady: false,
      };
      sites.set(id, s);
    }
    s.state = newState;
    s.states.add(`${oldState}→${newState}`);
    s.maps.add(map);
    if (made.size && !s.shapes.has(map) && s.shapes.size < 12) s.shapes.set(map, describe(map));
    s.events[segment]++;
    if (segment >= 1 && (newState === 'P' || newState === 'N') && oldState !== newState) s.wentPolyAfterReady = true;
  }
  return sites;
}

/** The file's lines, read in blocks (a log with --log-maps outgrows the longest string V8 makes). */
function* lines(file: string): Generator<string> {
  const fd = openSync(file, 'r');
  const block = Buffer.alloc(16 << 20);
  let rest = '';
  try {
    for (;;) {
      const n = readSync(fd, block, 0, block.length, null);
      if (n === 0) break;
      const text = rest + block.toString('latin1', 0, n);
      const parts = text.split('\n');
      rest = parts.pop()!;
      yield* parts;
    }
    if (rest) yield rest;
  } finally {
    closeSync(fd);
  }
}

function originOf(script: string): Site['origin'] {
  if (script.startsWith('node:')) return 'node';
  if (script.includes('/node_modules/')) return 'node_modules';
  if (/\/(dist\/)?(runtime|plugins|lib)\//.test(script)) return 'project';
  return 'other';
}

/** Maps each project site's generated position to its TypeScript source through the .js.map beside it. */
async function mapSources(sites: Iterable<{ at: string; source?: string }>, checkout: string): Promise<void> {
  let decode: ((m: string) => number[][][]) | undefined;
  try {
    ({ decode } = (await import('@jridgewell/sourcemap-codec' as string)) as { decode: (m: string) => number[][][] });
  } catch {
    return;
  }
  const maps = new Map<string, { sources: string[]; lines: number[][][]; dir: string } | null>();
  for (const s of sites) {
    const m = /^(.*):(\d+):(\d+)$/.exec(s.at);
    if (!m) continue;
    const file = m[1].startsWith('file://') ? fileURLToPath(m[1]) : m[1];
    if (!maps.has(file)) {
      const mapFile = `${file}.map`;
      if (!existsSync(mapFile)) maps.set(file, null);
      else {
        const j = JSON.parse(readFileSync(mapFile, 'utf8')) as { sources: string[]; mappings: string };
        maps.set(file, { sources: j.sources, lines: decode(j.mappings), dir: dirname(file) });
      }
    }
    const sm = maps.get(file);
    const rel = (p: string) => relative(checkout, p);
    if (!sm) {
      s.source = `${rel(file)}:${m[2]}:${m[3]}`;
      continue;
    }
    // V8's positions are 1-based; a source map's are 0-based. The last segment at or before the column.
    const segs = sm.lines[Number(m[2]) - 1] ?? [];
    const col = Number(m[3]) - 1;
    let best: number[] | undefined;
    for (const seg of segs) if (seg[0] <= col && seg.length >= 4) best = seg;
    s.source = best
      ? `${rel(resolve(sm.dir, sm.sources[best[1]]))}:${best[2] + 1}:${best[3] + 1}`
      : `${rel(file)}:${m[2]}:${m[3]}`;
  }
}

/** Sends `count` requests of a route, `connections` at a time; throws on an answer that is not 2xx. */
async function send(pool: Pool, t: Subject, count: number, connections = 4): Promise<void> {
  const url = new URL(t.url);
  let left = count;
  const worker = async () => {
    while (left-- > 0) {
      const res = await pool.request({
        path: url.pathname + url.search,
        method: (t.method ?? 'POST') as 'POST',
        headers: t.headers,
        body: t.body,
      });
      const text = await res.body.text();
      if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`${t.label}: ${res.statusCode}: ${text}`);
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
}

/** The log's size once V8 has written what it buffered (it writes in blocks: wait for the size to settle). */
async function settledSize(file: string): Promise<number> {
  let last = -1;
  for (let i = 0; i < 20; i++) {
    await sleep(150);
    const size = existsSync(file) ? statSync(file).size : 0;
    if (size === last) return size;
    last = size;
  }
  return last;
}

export function reportDeopts(deopts: Map<string, Deopt>, o: { top: number; all: boolean }): void {
  if (deopts.size === 0) return;
  const after = (d: Deopt) => d.events.slice(1).reduce((a, b) => a + b, 0);
  const rows = [...deopts.values()].filter((d) => after(d) > 0);
  const total = (origin: string, from: number) =>
    rows.filter((d) => d.origin === origin).reduce((a, d) => a + d.events.slice(from).reduce((x, y) => x + y, 0), 0);
  console.log(
    `\nDeoptimisations after the service was ready (warm-up + measured window; measured window alone): ` +
      ['project', 'node_modules', 'node', 'other'].map((g) => `${g} ${total(g, 1)} (${total(g, 2)})`).join(', '),
  );
  printTable(
    ['after ready', 'measured window', 'kind', 'reason', 'where'],
    rows
      .filter((d) => o.all || d.origin === 'project')
      .sort((a, b) => after(b) - after(a))
      .slice(0, o.top)
      .map((d) => [
        String(after(d)),
        String(d.events.slice(2).reduce((a, b) => a + b, 0)),
        d.kind,
        d.reason.slice(0, 48),
        d.source ?? d.at,
      ]),
  );
}

export function report(sites: Map<string, Site>, o: { perRequest?: number; top: number; all: boolean }): void {
  const rows = [...sites.values()].filter((s) => o.all || s.origin === 'project');
  const measured = (s: Site) => s.events.slice(2).reduce((a, b) => a + b, 0);
  const afterReady = (s: Site) => s.events.slice(1).reduce((a, b) => a + b, 0);
  const poly = rows.filter((s) => s.wentPolyAfterReady || ((s.state === 'P' || s.state === 'N') && afterReady(s) > 0));
  const byOrigin = new Map<string, { sites: number; poly: number; mega: number; events: number }>();
  for (const s of sites.values()) {
    if (afterReady(s) === 0) continue;
    const b = byOrigin.get(s.origin) ?? { sites: 0, poly: 0, mega: 0, events: 0 };
    b.sites++;
    if (s.state === 'P') b.poly++;
    if (s.state === 'N') b.mega++;
    b.events += measured(s);
    byOrigin.set(s.origin, b);
  }
  console.log('\nIC sites with events after the service was ready, by origin (state: the last one logged):');
  printTable(
    ['origin', 'sites', 'polymorphic (P)', 'megamorphic (N)', 'events in the measured window', 'events/request'],
    [...byOrigin].map(([origin, b]) => [
      origin,
      String(b.sites),
      String(b.poly),
      String(b.mega),
      String(b.events),
      o.perRequest ? fmt(b.events / o.perRequest, 2) : '-',
    ]),
  );
  const order = (a: Site, b: Site) =>
    measured(b) - measured(a) || afterReady(b) - afterReady(a) || b.maps.size - a.maps.size;
  console.log(
    `\n${o.all ? 'All' : 'Project'} sites that went polymorphic or megamorphic after the service was ready: ${poly.length} ` +
      `(megamorphic ${poly.filter((s) => s.state === 'N').length}, polymorphic ${poly.filter((s) => s.state === 'P').length})`,
  );
  printTable(
    ['state', 'maps', 'events (window)', 'events/req', 'IC', 'key', 'function', 'source'],
    poly
      .sort(order)
      .slice(0, o.top)
      .map((s) => [
        s.state,
        String(s.maps.size),
        String(measured(s)),
        o.perRequest ? fmt(measured(s) / o.perRequest, 3) : '-',
        s.type,
        s.key.slice(0, 28),
        s.fn.slice(0, 32),
        s.source ?? s.at,
      ]),
  );
  const shaped = poly.filter((s) => s.shapes.size > 1).slice(0, o.top);
  if (shaped.length) {
    console.log('\nThe maps each of those sites saw (IC_MAPS=1: root map, then the properties added in order):');
    for (const s of shaped) {
      console.log(`${s.state} ${s.type} .${s.key} in ${s.fn} at ${s.source ?? s.at}`);
      for (const d of new Set(s.shapes.values())) console.log(`    ${d}`);
    }
  }
  const missing = rows.filter((s) => !poly.includes(s) && measured(s) > 0).sort(order);
  if (missing.length) {
    console.log(
      `\nOther ${o.all ? '' : 'project '}sites with misses in the measured window (monomorphic, re-learning):`,
    );
    printTable(
      ['state', 'events (window)', 'IC', 'key', 'function', 'source'],
      missing
        .slice(0, o.top)
        .map((s) => [s.state, String(measured(s)), s.type, s.key.slice(0, 28), s.fn.slice(0, 32), s.source ?? s.at]),
    );
  }
}

export interface IcSitesRun {
  sites: Map<string, Site>;
  deopts: Map<string, Deopt>;
  /** The routes measured, in `routes` order (their segments in `Site.events`: 2 + index). */
  subjects: Subject[];
}

/**
 * Starts the service of `routes` (keys of bench/services/cases.ts, one service) from its shipped
 * config under V8's IC log, sends each route `warmup` requests and then `n` more, stops it and
 * parses the log: segment 0 is the start, 1 the warm-up, 2 + i route i's measured requests. The
 * upstreams it needs (the JSON-RPC echo, the LLM backend) run beside it and are stopped after.
 */
export async function measureIcSites(o: {
  routes: string[];
  warmup: number;
  n: number;
  checkout: string;
  run: 'dist' | 'source';
  logDir: string;
  logFile: string;
  maps?: boolean;
}): Promise<IcSitesRun> {
  // One service per run: the routes' (typed-proxy/…, or safety-filter/… with the bench's LLM backend).
  const serviceName = o.routes[0].split('/')[0];
  if (!o.routes.every((r) => r.startsWith(`${serviceName}/`))) throw new Error('IC_ROUTES: routes of one service');
  const service = SERVICES.find((s) => s.name === serviceName);
  if (!service) throw new Error(`IC_ROUTES: no service "${serviceName}" in bench/services/cases.ts`);
  const echo = await startNodeServer(join(root, 'bench/typed-proxy/upstream.ts'), {}, undefined);
  const backend =
    serviceName === 'safety-filter'
      ? await startNodeServer(join(root, 'bench/safety-filter/backend.ts'), {}, undefined)
      : undefined;
  try {
    const context: Context = {
      dir: o.checkout,
      run: o.run,
      logDir: o.logDir,
      nodeFlags: () => [
        '--log-ic',
        '--log-deopt',
        ...(o.maps ? ['--log-maps'] : []),
        `--logfile=${o.logFile}`,
        '--no-logfile-per-isolate',
      ],
      suffix: '',
      echoUrl: `http://127.0.0.1:${echo.port}/`,
      backendUrl: backend ? `http://127.0.0.1:${backend.port}/v1` : undefined,
      typedSet: [],
      readyTimeoutMs: 120_000,
    };
    const subjects = (await service.start(context)).filter((s) => o.routes.includes(s.key));
    if (subjects.length !== o.routes.length)
      throw new Error(`IC_ROUTES: not all of ${o.routes.join(', ')} are routes of ${serviceName}`);
    // Marks: [ready, warm, after route 1, after route 2, ...]: segment 0 is the start, 1 the warm-up.
    const marks = [await settledSize(o.logFile)];
    const pool = new Pool(new URL(subjects[0].url).origin, { connections: 4 });
    for (const t of subjects) await send(pool, t, o.warmup);
    marks.push(await settledSize(o.logFile));
    for (const t of subjects) {
      await send(pool, t, o.n);
      marks.push(await settledSize(o.logFile));
    }
    await pool.close();
    await stop(subjects[0].proc.child);
    const deopts = new Map<string, Deopt>();
    const sites = parseIcLog(o.logFile, marks, deopts);
    return { sites, deopts, subjects };
  } finally {
    await Promise.all([stop(echo.s.child), backend ? stop(backend.s.child) : undefined]);
  }
}

/**
 * IC events of project code per request of route i's measured window: a site whose objects come
 * in ever new hidden classes misses on every request; a settled service misses almost never.
 */
export function projectEventsPerRequest(sites: Map<string, Site>, i: number, n: number): number {
  let events = 0;
  for (const s of sites.values()) if (s.origin === 'project') events += s.events[2 + i] ?? 0;
  return events / n;
}

async function main(logDir: string): Promise<number> {
  const logArg = process.argv.indexOf('--log');
  const top = Math.floor(envNum('IC_TOP', 40));
  const all = process.env.IC_ALL === '1';
  const checkout = resolve(process.env.IC_CHECKOUT ?? root);
  if (logArg > 0) {
    const deopts = new Map<string, Deopt>();
    const sites = parseIcLog(process.argv[logArg + 1], [], deopts);
    await mapSources(sites.values(), checkout);
    await mapSources(deopts.values(), checkout);
    report(sites, { top, all });
    reportDeopts(deopts, { top, all });
    return 0;
  }
  const warmup = Math.floor(envNum('IC_WARMUP', 500));
  const n = Math.floor(envNum('IC_N', 3000));
  const routes = (process.env.IC_ROUTES ?? 'typed-proxy/jsonrpc,typed-proxy/send').split(',').map((x) => x.trim());
  const run = process.env.BENCH_RUN === 'source' ? 'source' : 'dist';
  if (run === 'dist' && process.env.BENCH_BUILD !== '0' && checkout === resolve(root)) {
    console.log('building dist/ (npm run build): the service runs the compiled build, as shipped');
    execFileSync(process.execPath, [join(root, 'scripts/build.mjs')], { cwd: root, stdio: 'ignore' });
  }
  const logFile = process.env.IC_LOG ? resolve(process.env.IC_LOG) : join(logDir, 'v8-ic.log');
  const serviceName = routes[0].split('/')[0];
  const { sites, deopts, subjects } = await measureIcSites({
    routes,
    warmup,
    n,
    checkout,
    run,
    logDir,
    logFile,
    maps: process.env.IC_MAPS === '1',
  });
  await mapSources(sites.values(), checkout);
  await mapSources(deopts.values(), checkout);
  console.log(
    `${serviceName} (${relative(process.cwd(), checkout) || '.'}, ${run}): ${warmup} warm-up + ${n} measured requests per route ` +
      `(${subjects.map((s) => s.key).join(', ')}); log ${fmt(statSync(logFile).size / 1e6, 1)} MB`,
  );
  report(sites, { perRequest: n * subjects.length, top, all });
  reportDeopts(deopts, { top, all });
  for (const [i, t] of subjects.entries()) {
    console.log(
      `${t.key}: ${fmt(projectEventsPerRequest(sites, i, n), 2)} project IC events per request in the measured window`,
    );
  }
  if (process.env.IC_JSON) {
    const out = [...sites.values()].map((s) => ({
      ...s,
      states: [...s.states],
      maps: s.maps.size,
      shapes: [...new Set(s.shapes.values())],
    }));
    writeFileSync(process.env.IC_JSON, JSON.stringify(out, null, 1));
  }
  if (!process.env.IC_LOG) console.log(`(set IC_LOG=<file> to keep the log)`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('ic-sites.ts')) {
  const logDir = mkdtempSync(join(tmpdir(), 'switchyard-ic-'));
  await runBench(() => main(logDir), { logDir, keepLogs: process.env.BENCH_KEEP_LOGS === '1' });
}
