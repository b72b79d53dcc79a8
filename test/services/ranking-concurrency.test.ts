/**
 * Ratings under concurrency: 1000 comparisons posted at once lose no update. Every rating must
 * equal a sequential replay of the stored comparisons in id order (ids follow commit order),
 * on SQLite and on PostgreSQL.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eloUpdate } from '../../plugins/elo/elo.ts';
import { PG_URL } from '../helpers/reachable.ts';
import {
  backends,
  type ComparisonJson,
  type EntityJson,
  type Ranking,
  skipPg,
  startRanking,
} from './ranking-helpers.ts';

const ENTITIES = 12;
const COMPARISONS = 1000;

for (const { driver, skip } of backends) {
  describe.skipIf(skip)(`concurrent comparisons on ${driver}`, () => {
    let r: Ranking;
    beforeAll(async () => {
      // 1000 connections from one address at once, with the shipped limits: the per-client share
      // (64) applies only near max_connections, which these stay under (issue 29 item 3). The
      // clients share this process's event loop with the service: on a busy machine a client's
      // headers can wait behind the service's work past the shipped 10 s header deadline (408s
      // seen at load 10-14, issue 32). This test is about lost updates, not slow clients
      // (connection-pressure.test.ts is), so the deadline is the test's own timeout.
      r = await startRanking(driver, {}, ['limits.header_timeout_ms=120000']);
    });
    afterAll(() => r?.close());

    it(`${COMPARISONS} concurrent comparisons match a sequential replay`, async () => {
      const entities: EntityJson[] = [];
      for (let i = 0; i < ENTITIES; i++)
        entities.push(await r.json<EntityJson>('POST', '/entities/', { name: `item ${i}` }));
      // Few entities, many comparisons: every entity is in about 170 concurrent updates.
      let seed = 12345;
      const rand = () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      };
      const bodies = Array.from({ length: COMPARISONS }, () => {
        const a = Math.floor(rand() * ENTITIES);
        const b = (a + 1 + Math.floor(rand() * (ENTITIES - 1))) % ENTITIES;
        const ida = entities[a]!.id;
        const idb = entities[b]!.id;
        return { entity1_id: ida, entity2_id: idb, selected_entity_id: rand() < 0.5 ? ida : idb };
      });
      // A refusal shows with its body, a failed request with its cause (issue 32).
      const answers = await Promise.all(
        bodies.map((b) =>
          r.send('POST', '/comparisons/', b).then(
            async (a) => {
              const text = await a.text();
              return a.status === 200 ? '' : `${a.status} ${text.slice(0, 300)}`;
            },
            (err: Error & { cause?: { code?: string; message?: string } }) =>
              `${err.message}: ${err.cause?.code ?? ''} ${err.cause?.message ?? ''}`,
          ),
        ),
      );
      expect(answers.filter((a) => a !== '')).toEqual([]);

      const stored: ComparisonJson[] = [];
      for (let skip = 0; ; skip += 1000) {
        const page = await r.json<ComparisonJson[]>('GET', `/comparisons/?skip=${skip}&limit=1000`);
        stored.push(...page);
        if (page.length < 1000) break;
      }
      expect(stored).toHaveLength(COMPARISONS);
      for (let i = 1; i < stored.length; i++) expect(stored[i]!.id).toBeGreaterThan(stored[i - 1]!.id);

      const ratings = new Map(entities.map((e) => [e.id, 1500]));
      const counts = new Map(entities.map((e) => [e.id, 0]));
      for (const c of stored) {
        const [ra, rb] = eloUpdate(
          ratings.get(c.entity1_id)!,
          ratings.get(c.entity2_id)!,
          c.selected_entity_id === c.entity1_id ? 1 : 0,
        );
        ratings.set(c.entity1_id, ra);
        ratings.set(c.entity2_id, rb);
        counts.set(c.entity1_id, counts.get(c.entity1_id)! + 1);
        counts.set(c.entity2_id, counts.get(c.entity2_id)! + 1);
      }
      const now = await r.json<EntityJson[]>('GET', '/entities/?limit=1000');
      for (const e of now) expect(e.rating, `entity ${e.id}`).toBe(ratings.get(e.id));
      // Elo is zero-sum: the mean stays 1500.
      expect(now.reduce((s, e) => s + e.rating, 0) / ENTITIES).toBeCloseTo(1500, 6);

      // The bandit state counted every comparison exactly once.
      const states = await r.json<Array<{ entity1_id: number; entity2_id: number; comparisons: number }>>(
        'GET',
        '/mab/state/?limit=1000',
      );
      expect(states.reduce((s, p) => s + p.comparisons, 0)).toBe(COMPARISONS);
      for (const e of entities) {
        const mine = states
          .filter((p) => p.entity1_id === e.id || p.entity2_id === e.id)
          .reduce((s, p) => s + p.comparisons, 0);
        expect(mine).toBe(counts.get(e.id));
      }
    }, 120_000);
  });
}

// The intermittent 500 of issue 32: PostgreSQL cancelled a comparison's statement (57014). A
// statement cancelled outside the optimistic attempt (a cancel request, a statement_timeout) is
// a 503 with Retry-After that changed nothing; the next comparison counts normally.
describe.skipIf(skipPg)('a cancelled comparison on postgres', () => {
  let r: Ranking;
  beforeAll(async () => {
    r = await startRanking('postgres');
  });
  afterAll(() => r?.close());

  it('is a 503 with Retry-After, nothing stored, not a 500', async () => {
    const a = await r.json<EntityJson>('POST', '/entities/', { name: 'a' });
    const b = await r.json<EntityJson>('POST', '/entities/', { name: 'b' });
    const table = `${r.env.RANK_DB_PREFIX}entities`;
    const locker = new pg.Client({ connectionString: PG_URL });
    const admin = new pg.Client({ connectionString: PG_URL });
    await Promise.all([locker.connect(), admin.connect()]);
    try {
      // Another session holds the table: the optimistic attempt gives up (55P03), the retry waits.
      await locker.query(`BEGIN; LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
      let done = false;
      const answer = r
        .send('POST', '/comparisons/', { entity1_id: a.id, entity2_id: b.id, selected_entity_id: a.id })
        .finally(() => {
          done = true;
        });
      let cancels = 0;
      while (!done) {
        const { rows } = await admin.query(
          `SELECT pg_cancel_backend(pid) AS ok FROM pg_stat_activity
            WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query LIKE $1`,
          [`%${table}%`],
        );
        cancels += rows.filter((row: { ok: boolean }) => row.ok).length;
        await sleep(5);
      }
      const res = await answer;
      expect([res.status, res.headers.get('retry-after'), cancels > 0]).toEqual([503, '1', true]);
      expect(r.errors).toEqual([]);
    } finally {
      await locker.query('ROLLBACK');
      await Promise.all([locker.end(), admin.end()]);
    }
    expect(await r.json<ComparisonJson[]>('GET', '/comparisons/')).toEqual([]);
    const ratings = (await r.json<EntityJson[]>('GET', '/entities/')).map((e) => e.rating);
    expect(ratings).toEqual([1500, 1500]);
    await r.json('POST', '/comparisons/', { entity1_id: a.id, entity2_id: b.id, selected_entity_id: a.id });
    expect(await r.json<ComparisonJson[]>('GET', '/comparisons/')).toHaveLength(1);
  });
});
