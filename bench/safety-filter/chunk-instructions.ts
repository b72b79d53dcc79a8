/**
 * `npx tsx bench/safety-filter/chunk-instructions.ts`: instructions per streamed chunk of the
 * egress stream check (as chunk-check.ts runs it), counted by `valgrind --tool=callgrind`, so the
 * figure does not depend on the machine's load. Each checkout's check runs in its own process
 * under callgrind: WARM chunks first (uncounted: start-up, module loading, the JIT's warm-up), then
 * N chunks in slices of GC_EVERY, each slice inside a `vm` script run, and callgrind counts only
 * the main thread's instructions within those runs (`--toggle-collect` on node's
 * ContextifyScript::RunInContext). V8 runs without helper threads (`--single-threaded`, see
 * v8Flags), so compilation and collection are the main thread's too.
 *
 * Garbage collection on a fixed schedule: every slice starts from a collected heap and ends with
 * a forced full collection (`gc()`), counted apart and left out of the figure (it traces the
 * whole process's heap: a per-process cost, not a per-chunk one); the scavenges the chunks cause
 * stay in. Without the schedule, where V8 chose to collect moved the figure: 86f6e69's marginal
 * (I(2N) - I(N)) / N was 9,229 per chunk while its average over 2N was 20,804 (README, issue 26).
 * With it the average over N, over 2N and the marginal agree (within 0.5% for 86f6e69).
 * Each figure is split into scavenging (Heap::CollectGarbage), compiling (Runtime_Compile*:
 * TurboFan still compiles after the warm-up, e.g. when a full collection dropped optimised code
 * that held a map no live object had) and the rest. Slow (callgrind runs node ~50x slower):
 * CHUNKS=20000 takes 15-25 minutes per checkout on the loaded 2-core machine.
 *
 * Env: CHUNKS (N, default 5000), WARM (20000), GC_EVERY (chunks per slice, default 5000; 0: one
 * slice, V8 collects as it sees fit), CHUNK_CHARS (4), TEXT (`prose` or `mixed`, as in
 * chunk-check.ts), BASELINE (another checkout, e.g. a `git worktree` of the commit to compare
 * with: counted too, and the ratio printed; or run this file from the other checkout's directory,
 * since the check measured is the one of the current directory), KEEP_CALLGRIND (a path prefix:
 * the callgrind files are kept there, for callgrind_annotate), NODE_FLAGS. Needs valgrind and a
 * node binary with symbols.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Script } from 'node:vm';
import type { SseEvent } from '../../runtime/index.ts';
import { benchEvents, benchText, feed, filterOf } from './chunk-filter.ts';

const size = Number(process.env.CHUNK_CHARS ?? 4);
const warm = Number(process.env.WARM ?? 20_000);
const text = benchText(process.env.TEXT);

/** Chunks between two forced full collections (GC_EVERY; 0: none, V8 collects when it sees fit). */
const every = Number(process.env.GC_EVERY ?? 5000);

// The child: one checkout's check over WARM + COUNT chunks, then exit (callgrind counts the process).
if (process.env.CHUNK_INSTRUCTIONS_CHECKOUT) {
  const count = Number(process.env.CHUNK_INSTRUCTIONS_COUNT);
  const gc = (globalThis as { gc?: () => void }).gc;
  if (every > 0 && !gc) throw new Error('GC_EVERY needs --expose-gc in NODE_FLAGS');
  const filter = await filterOf(process.env.CHUNK_INSTRUCTIONS_CHECKOUT);
  const f = filter();
  let out = feed(f, benchEvents(warm, size, text));
  // Counted: what runs inside a script's run (callgrind's --toggle-collect), one run per slice of
  // GC_EVERY chunks, each ended by a full collection: the same schedule in every run, so where V8
  // would have collected (which differed between the two filters, and between N and 2N) no longer
  // moves the figure. The forced collections are counted apart (GCExtension::GC: they mostly
  // trace the process's whole heap, the same in both checkouts); the young generation's
  // scavenges stay in the figure (they grow with what the chunks allocate). Between the runs,
  // uncounted, the next slice's events are made (the heap does not hold all the run's events).
  let slice: SseEvent[] = [];
  (globalThis as { countedRun?: () => number }).countedRun = () => {
    const o = feed(f, slice);
    gc?.();
    return o;
  };
  const counted = new Script('countedRun()');
  const step = every > 0 ? every : count;
  for (let from = 0; from < count; from += step) {
    slice = benchEvents(Math.min(step, count - from), size, text, warm + from);
    gc?.(); // uncounted: the slice's events and the warm-up's garbage
    out += counted.runInThisContext() as number;
  }
  process.stdout.write(`${out}\n`);
  process.exit(0);
}

const n = Number(process.env.CHUNKS ?? 5000);
execFileSync('valgrind', ['--version']);
const dir = mkdtempSync(join(tmpdir(), 'chunk-instructions-'));
const self = fileURLToPath(import.meta.url);

/**
 * V8 without background threads (`--single-threaded`: compilation and garbage collection on the
 * main thread, when they are due). With them, the main thread's count depended on when callgrind
 * (which runs one thread at a time) let a compile job finish: the same checkout measured 43k and
 * 87k instructions per chunk in two runs on a quiet machine. `--predictable-gc-schedule` fixes the
 * young generation's size and the heap's growth (no memory reducer, no idle-time collections), and
 * `--expose-gc` gives the child the `gc()` of its fixed schedule (GC_EVERY). NODE_FLAGS replaces
 * the default.
 */
const v8Flags = (process.env.NODE_FLAGS ?? '--single-threaded --predictable-gc-schedule --expose-gc')
  .split(' ')
  .filter(Boolean);

/** A counted run: all its instructions, and those that went to collecting and compiling. */
interface Count {
  /** Less the forced full collections. */
  all: number;
  /** Inclusive under the forced full collections (GCExtension::GC, the child's `gc()`). */
  forcedGc: number;
  /** Inclusive under Heap::CollectGarbage, less the forced ones: the scavenges (and any other collection) V8 started. */
  gc: number;
  /** Inclusive under Runtime_Compile* (lazy, baseline and TurboFan compiles, on the main thread). */
  compile: number;
}

/** The inclusive instructions of the functions in callgrind_annotate's lines whose name matches `re`, summed. */
function inclusive(lines: string[], re: RegExp): number {
  let sum = 0;
  for (const line of lines) {
    if (!re.test(line)) continue;
    const m = /^\s*([\d,]+)/.exec(line);
    if (m) sum += Number(m[1].replaceAll(',', ''));
  }
  return sum;
}

/** Instructions (callgrind's Ir) of one child process. */
function instructions(checkout: string, count: number): Count {
  const out = join(dir, `callgrind.${count}`);
  const run = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      `--callgrind-out-file=${out}`,
      '--smc-check=all-non-file',
      '--collect-atstart=no',
      '--toggle-collect=node::contextify::ContextifyScript::RunInContext*',
      process.execPath,
      ...v8Flags,
      '--import',
      'tsx',
      self,
    ],
    {
      env: { ...process.env, CHUNK_INSTRUCTIONS_CHECKOUT: checkout, CHUNK_INSTRUCTIONS_COUNT: String(count) },
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const collected = /Collected : (\d+)/.exec(run.stderr);
  if (run.status !== 0 || !collected)
    throw new Error(`callgrind run failed (${run.status}):\n${run.stderr.slice(-2000)}`);
  if (process.env.KEEP_CALLGRIND) execFileSync('cp', [out, `${process.env.KEEP_CALLGRIND}.${count}`]);
  const annotated = spawnSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', out], {
    encoding: 'utf8',
    maxBuffer: 256 << 20,
  });
  if (annotated.status !== 0) throw new Error(`callgrind_annotate failed: ${annotated.stderr}`);
  const lines = annotated.stdout.split('\n');
  const forcedGc = inclusive(lines, /[\s:]v8::internal::GCExtension::GC\(/);
  return {
    all: Number(collected[1]) - forcedGc,
    forcedGc,
    // The forced collections' own bookkeeping outside Heap::CollectGarbage makes this a little negative without scavenges.
    gc: Math.max(0, inclusive(lines, /[\s:]v8::internal::Heap::CollectGarbage\(/) - forcedGc),
    compile: inclusive(lines, /[\s:]v8::internal::Runtime_Compile\w*\(/),
  };
}

const k = (x: number) => x.toFixed(0).replace(/\B(?=(\d{3})+(?!\d))/g, ',');

/**
 * Instructions per chunk of a checkout's check: averaged over N chunks, over 2N, and the marginal
 * (I(2N) - I(N)) / N (what a run spends once cancels out). With the fixed collection schedule the
 * three agree; without it (GC_EVERY=0) where V8 collected moved the marginal figure by 2x.
 */
function perChunk(checkout: string): number {
  const one = instructions(checkout, n);
  const two = instructions(checkout, 2 * n);
  const marginal = (two.all - one.all) / n;
  const line = (c: Count, chunks: number) =>
    `${k(c.all / chunks)} per chunk over ${chunks} (of which scavenging ${k(c.gc / chunks)}, compiling ${k(c.compile / chunks)}; ` +
    `the forced full collections, apart, ${k(c.forcedGc / chunks)})`;
  console.log(`${checkout} (after ${warm} chunks of warm-up, a full collection every ${every || 'never'}):`);
  console.log(`  ${line(one, n)}`);
  console.log(`  ${line(two, 2 * n)}`);
  const rest = (c: Count) => c.all - c.gc - c.compile;
  console.log(
    `  marginal (I(${2 * n}) - I(${n})) / ${n}: ${k(marginal)} (scavenging ${k((two.gc - one.gc) / n)}, ` +
      `compiling ${k((two.compile - one.compile) / n)}, the rest ${k((rest(two) - rest(one)) / n)}; forced full collections ${k((two.forcedGc - one.forcedGc) / n)})`,
  );
  return marginal;
}

try {
  const mine = perChunk(resolve('.'));
  if (process.env.BASELINE) {
    const base = perChunk(resolve(process.env.BASELINE));
    console.log(
      `instructions per chunk (marginal): this checkout ${k(mine)}, baseline ${k(base)} (${(mine / base).toFixed(2)}x); ${size}-character chunks, text ${process.env.TEXT ?? 'prose'}`,
    );
  } else {
    console.log(
      `instructions per chunk (marginal): ${k(mine)}; ${size}-character chunks, text ${process.env.TEXT ?? 'prose'}`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
