/**
 * `npx tsx bench/safety-filter/chunk-check.ts`: CPU per streamed chunk of the egress stream check
 * alone, in process (no HTTP, no Koa): the shipped config's egress classifiers (`pii`, `secrets`)
 * behind streamCheck, fed the bench's answer as OpenAI chunks of 4 characters, one event at a
 * time as a paced model sends them. For iterating on the check's cost with less noise than
 * bench:safety (whose figure includes the proxy); the figure that counts is bench:safety's.
 *
 * Env: CHUNKS (default 200000), ROUNDS (5), CHUNK_CHARS (4), TEXT (`prose`, the backend's filler;
 * `mixed`: prose with numbers, addresses and a key in it), BASELINE (another checkout: its check
 * runs too, in the same process, rounds interleaved).
 */
import { resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { SseFilter } from '../../runtime/index.ts';
import { benchEvents, benchText, feed, filterOf } from './chunk-filter.ts';

const chunks = Number(process.env.CHUNKS ?? 200_000);
const rounds = Number(process.env.ROUNDS ?? 5);
const size = Number(process.env.CHUNK_CHARS ?? 4);

const input = benchEvents(chunks, size, benchText(process.env.TEXT));
const variants: Array<[string, () => SseFilter]> = [['this checkout', await filterOf(resolve('.'))]];
if (process.env.BASELINE) variants.push(['baseline', await filterOf(process.env.BASELINE)]);
const samples = new Map<string, number[]>(variants.map(([name]) => [name, []]));
let out = 0;
for (let r = 0; r < rounds + 1; r++) {
  for (const [name, filter] of r % 2 ? [...variants].reverse() : variants) {
    const f = filter();
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    out += feed(f, input);
    const used = process.cpuUsage(cpu);
    const ns = ((used.user + used.system) * 1000) / chunks;
    // The first round warms up.
    if (r > 0) samples.get(name)?.push(ns);
    if (r > 0)
      console.log(
        `round ${r} ${name}: ${ns.toFixed(0)} ns CPU per chunk (${(((performance.now() - t0) * 1e6) / chunks).toFixed(0)} ns wall)`,
      );
  }
}
const median = (list: number[]) => [...list].sort((a, b) => a - b)[list.length >> 1] ?? Number.NaN;
const mine = median(samples.get('this checkout') ?? []);
const base = median(samples.get('baseline') ?? []);
console.log(
  `median: this checkout ${mine.toFixed(0)} ns CPU per chunk` +
    (process.env.BASELINE ? `, baseline ${base.toFixed(0)} ns (${(mine / base).toFixed(2)}x)` : '') +
    `; ${chunks} chunks of ${size} characters, ${(out / (rounds + 1) / variants.length / chunks).toFixed(2)} events out per chunk`,
);
