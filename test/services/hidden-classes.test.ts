/**
 * Objects made per request keep their hidden classes (issue 28). On Node 20 an object made by a
 * spread that adds a key (`{ ...state, allowed }`) gets a class of its own on every request: each
 * costs ~1.5 µs, the classes fill the old generation, and every read of such objects misses its
 * inline cache (docs/architecture.md, "Process tuning"). That slipped in twice unseen: the token
 * limit's reservation (7.25 misses per safety-filter request) and the entity store's query and
 * mutation events (36 per ranking comparison).
 *
 * Counted, not timed: the shipped service runs from its config under V8's IC log
 * (bench/typed-proxy/ic-sites.ts, the requests `npm run bench` sends), and the misses of project
 * code per request after a warm-up must stay near none (0.01–0.02 measured when this was written).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { measureIcSites, projectEventsPerRequest } from '../../bench/typed-proxy/ic-sites.ts';

const root = join(import.meta.dirname, '../..');
const WARMUP = 300;
const N = 300;
/** Misses per request allowed: a class per request makes one or more on every request. */
const BUDGET = 0.2;

const cases: Array<[string, string[]]> = [
  ['the safety filter, chat and streamed chat', ['safety-filter/chat', 'safety-filter/chat-stream']],
  ['the ranking service, a comparison', ['ranking/compare']],
  ['the typed proxy, tools/call and the typed send', ['typed-proxy/jsonrpc', 'typed-proxy/send']],
];

describe('no hidden class made per request (inline-cache misses of project code, counted)', () => {
  it.each(cases)(
    '%s',
    async (_name, routes) => {
      const logDir = mkdtempSync(join(tmpdir(), 'sy-ic-test-'));
      try {
        const { sites, subjects } = await measureIcSites({
          routes,
          warmup: WARMUP,
          n: N,
          checkout: root,
          run: 'source',
          logDir,
          logFile: join(logDir, 'v8-ic.log'),
        });
        // The sites that missed most, named with each route over the budget.
        const worst = [...sites.values()]
          .filter((s) => s.origin === 'project')
          .map((s) => ({ at: `${s.fn} ${s.at} ${s.key}`, misses: s.events.slice(2).reduce((a, b) => a + b, 0) }))
          .sort((a, b) => b.misses - a.misses)
          .slice(0, 5);
        const over = subjects
          .map((s, i) => ({ route: s.key, perRequest: projectEventsPerRequest(sites, i, N) }))
          .filter((r) => r.perRequest > BUDGET)
          .map((r) => ({ ...r, worst }));
        expect(over).toEqual([]);
      } finally {
        rmSync(logDir, { recursive: true, force: true });
      }
    },
    300_000,
  );
});
