import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  type ChangeRecord,
  DuplicateKeyError,
  type Entity,
  type EntityStore,
  type EntityStoreOptions,
  type Filter,
  GatewayError,
  InvalidQueryError,
  type MutationEvent,
  openSqlDatabase,
  QueryBudgetExceededError,
  type QueryEvent,
  ReadOnlyStoreError,
  ReplicationGapError,
  type SqlDatabase,
  type SqlParam,
  VersionConflictError,
} from '../../runtime/index.ts';
import { entityTestStores } from '../helpers/entity-stores.ts';

const stores = await entityTestStores('entity store tests', 'es');
const { backends } = stores;

/** Records the SQL a store sends (to EXPLAIN what a query compiled to). */
function recording(db: SqlDatabase, log: Array<{ sql: string; params: readonly SqlParam[] }>): SqlDatabase {
  return {
    ...db,
    driver: db.driver,
    query: (sql, params = []) => {
      log.push({ sql, params });
      return db.query(sql, params);
    },
  };
}

async function expectGatewayError<E extends GatewayError>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => E,
): Promise<E> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(type);
  expect(err).toBeInstanceOf(GatewayError);
  return err as E;
}

describe.each(backends)('entity store on $name', (backend) => {
  const { skip } = backend;
  const open = (name: string, options: EntityStoreOptions = {}, wrap?: (db: SqlDatabase) => SqlDatabase) =>
    stores.open(backend.name, name, options, {}, wrap);

  it.skipIf(skip)('creates, reads, updates and deletes, with versions and timestamps', async () => {
    const store = await open('crud');
    expect(store.driver).toBe(backend.name);
    const a = await store.create('item', { name: 'alpha', rating: 1500 });
    expect(a).toMatchObject({ type: 'item', key: null, version: 1, data: { name: 'alpha', rating: 1500 } });
    expect(a.id).toBeGreaterThan(0);
    expect(a.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(a.updated_at).toBe(a.created_at);
    const b = await store.create('item', { name: 'beta', nested: { deep: [1, 'two', null] } });
    expect(b.id).toBeGreaterThan(a.id);

    expect(await store.get('item', a.id)).toEqual(a);
    expect(await store.get('other', a.id)).toBeUndefined(); // ids are typed on read
    expect(await store.get('item', 999_999)).toBeUndefined();
    expect(await store.get('item', -1)).toBeUndefined();
    expect(await store.getMany('item', [b.id, 424242, a.id])).toEqual([b, a]);

    await new Promise((r) => setTimeout(r, 5));
    const a2 = await store.update('item', a.id, { name: 'alpha', rating: 1516 });
    expect(a2).toMatchObject({ id: a.id, version: 2, created_at: a.created_at, data: { rating: 1516 } });
    expect(a2!.updated_at > a.updated_at).toBe(true);
    expect(await store.update('item', 424242, { x: 1 })).toBeUndefined();
    expect(await store.update('other', a.id, { x: 1 })).toBeUndefined();

    expect(await store.delete('item', b.id)).toBe(true);
    expect(await store.delete('item', b.id)).toBe(false);
    expect(await store.get('item', b.id)).toBeUndefined();

    // Ids are never reused, even after the newest one was deleted.
    const c = await store.create('item', { name: 'gamma' });
    expect(c.id).toBeGreaterThan(b.id);

    await expectGatewayError(store.create('item', [] as unknown as Record<string, unknown>), InvalidQueryError);
    await expectGatewayError(store.create('', { x: 1 }), InvalidQueryError);
    await store.ping();
  });

  it.skipIf(skip)('refuses a stale ifVersion with a VersionConflictError and reports it', async () => {
    const conflicts: unknown[] = [];
    const store = await open('versions', { observer: { onConflict: (e) => conflicts.push(e) } });
    const e = await store.create('item', { n: 1 });
    await store.update('item', e.id, { n: 2 }, { ifVersion: 1 });
    const err = await expectGatewayError(store.update('item', e.id, { n: 3 }, { ifVersion: 1 }), VersionConflictError);
    expect(err.kind).toBe('conflict');
    expect(err.code).toBe('version_conflict');
    expect(err.details).toEqual({ type: 'item', id: e.id, expected_version: 1, actual_version: 2 });
    await expectGatewayError(store.delete('item', e.id, { ifVersion: 7 }), VersionConflictError);
    expect((await store.get('item', e.id))!.data).toEqual({ n: 2 });
    expect(conflicts).toEqual([
      { type: 'item', id: e.id, expected: 1, actual: 2 },
      { type: 'item', id: e.id, expected: 7, actual: 2 },
    ]);
    expect(await store.delete('item', e.id, { ifVersion: 2 })).toBe(true);
  });

  it.skipIf(skip)('keeps keys unique per type and upserts by key', async () => {
    const store = await open('keys');
    const p = await store.create('pair', { wins: 0 }, { key: '3:7' });
    expect(p.key).toBe('3:7');
    await expectGatewayError(store.create('pair', { wins: 9 }, { key: '3:7' }), DuplicateKeyError);
    const other = await store.create('other', { x: 1 }, { key: '3:7' }); // another type: fine
    expect(other.key).toBe('3:7');

    expect(await store.getByKey('pair', '3:7')).toEqual(p);
    expect(await store.getByKey('pair', 'nope')).toBeUndefined();

    const up = await store.upsertByKey('pair', '3:7', { wins: 1 });
    expect(up).toMatchObject({ id: p.id, version: 2, data: { wins: 1 } });
    const fresh = await store.upsertByKey('pair', '1:2', { wins: 5 });
    expect(fresh).toMatchObject({ version: 1, key: '1:2', data: { wins: 5 } });
    await expectGatewayError(store.upsertByKey('pair', '3:7', { wins: 2 }, { ifVersion: 1 }), VersionConflictError);
    await expectGatewayError(store.upsertByKey('pair', '9:9', { wins: 2 }, { ifVersion: 1 }), VersionConflictError);
    expect((await store.upsertByKey('pair', '3:7', { wins: 2 }, { ifVersion: 2 })).version).toBe(3);
    expect(await store.count('pair')).toBe(2);
  });

  it.skipIf(skip)('filters with every operator, nested any/all, typed comparisons', async () => {
    const store = await open('filters');
    const mk = (data: Record<string, unknown>, key?: string) => store.create('thing', data, { key });
    const a = await mk({ name: 'Apple pie', n: 10, s: 'b', flag: true, stats: { wins: 3 } }, 'k-a');
    const b = await mk({ name: 'banana', n: 9, s: 'a', flag: false, stats: { wins: 7 } }, 'k-b');
    const c = await mk({ name: 'Cherry', n: '9', s: 'c', flag: null, stats: { wins: '7' } });
    const d = await mk({ name: 'date', n: 2.5, s: 10 });
    await store.create('elsewhere', { name: 'apple', n: 10 });

    const ids = async (filter: Filter) => (await store.query('thing', { filter })).items.map((e) => e.id);

    expect(await ids({ field: 'n', op: 'eq', value: 9 })).toEqual([b.id]); // not the string "9"
    expect(await ids({ field: 'n', op: 'eq', value: '9' })).toEqual([c.id]);
    expect(await ids({ field: 'n', op: 'gt', value: 5 })).toEqual([a.id, b.id]); // 10 > 9 numerically
    expect(await ids({ field: 'n', op: 'gte', value: 9 })).toEqual([a.id, b.id]);
    expect(await ids({ field: 'n', op: 'lt', value: 9 })).toEqual([d.id]);
    expect(await ids({ field: 'n', op: 'lte', value: 2.5 })).toEqual([d.id]);
    expect(await ids({ field: 's', op: 'gt', value: 'a' })).toEqual([a.id, c.id]); // strings only, not 10
    expect(await ids({ field: 's', op: 'lt', value: 'b' })).toEqual([b.id]);
    expect(await ids({ field: 'n', op: 'ne', value: 9 })).toEqual([a.id, c.id, d.id]);
    expect(await ids({ field: 'flag', op: 'eq', value: true })).toEqual([a.id]);
    expect(await ids({ field: 'flag', op: 'eq', value: false })).toEqual([b.id]);
    expect(await ids({ field: 'flag', op: 'ne', value: true })).toEqual([b.id, c.id, d.id]);
    expect(await ids({ field: 'flag', op: 'eq', value: null })).toEqual([c.id, d.id]); // null or missing
    expect(await ids({ field: 'flag', op: 'ne', value: null })).toEqual([a.id, b.id]);
    expect(await ids({ field: 'n', op: 'in', value: [9, 2.5, 'x'] })).toEqual([b.id, d.id]);
    expect(await ids({ field: 'n', op: 'in', value: [] })).toEqual([]);
    expect(await ids({ field: 'name', op: 'contains', value: 'AN' })).toEqual([b.id]);
    expect(await ids({ field: 'name', op: 'contains', value: 'e' })).toEqual([a.id, c.id, d.id]);
    expect(await ids({ field: 'name', op: 'contains', value: '%' })).toEqual([]); // no wildcards
    expect(await ids({ field: 'stats.wins', op: 'eq', value: 7 })).toEqual([b.id]);
    expect(await ids({ field: 'stats.wins', op: 'gte', value: 3 })).toEqual([a.id, b.id]);
    // The store's own fields.
    expect(await ids({ field: 'id', op: 'in', value: [a.id, c.id] })).toEqual([a.id, c.id]);
    expect(await ids({ field: 'id', op: 'gt', value: b.id })).toEqual([c.id, d.id]);
    expect(await ids({ field: 'key', op: 'eq', value: null })).toEqual([c.id, d.id]);
    expect(await ids({ field: 'key', op: 'contains', value: '-B' })).toEqual([b.id]);
    expect(await ids({ field: 'version', op: 'eq', value: 1 })).toEqual([a.id, b.id, c.id, d.id]);
    expect(await ids({ field: 'created_at', op: 'lte', value: new Date().toISOString() })).toHaveLength(4);
    // Nesting.
    expect(
      await ids({
        any: [
          {
            all: [
              { field: 'n', op: 'gt', value: 5 },
              { field: 'flag', op: 'eq', value: false },
            ],
          },
          { field: 'name', op: 'eq', value: 'date' },
        ],
      }),
    ).toEqual([b.id, d.id]);
    expect(await ids({ all: [] })).toEqual([a.id, b.id, c.id, d.id]);
    expect(await ids({ any: [] })).toEqual([]);
    expect(await store.count('thing', { field: 'name', op: 'contains', value: 'a' })).toBe(3);
  });

  it.skipIf(skip)('treats SQL-looking values as data and rejects bad fields and operators', async () => {
    const store = await open('injection');
    const evil = "x'); DROP TABLE entity_entities; --";
    const e = await store.create('t', { name: evil, "we'ird": 1 }, { key: "'; DELETE FROM x; --" });
    expect((await store.query('t', { filter: { field: 'name', op: 'eq', value: evil } })).items).toEqual([e]);
    expect(await store.count('t', { field: 'name', op: 'contains', value: "'); DROP" })).toBe(1);
    expect(await store.getByKey('t', "'; DELETE FROM x; --")).toEqual(e);
    expect(await store.count('t')).toBe(1);

    for (const field of ["name') OR 1=1 --", 'a..b', '', "we'ird", 'a.b c', '$.name']) {
      const err = await expectGatewayError(
        store.query('t', { filter: { field, op: 'eq', value: 1 } }),
        InvalidQueryError,
      );
      expect(err.code).toBe('invalid_query');
      expect(err.kind).toBe('bad_request');
      expect(err.details).toEqual({ field });
    }
    const badOp = { field: 'name', op: 'like', value: 'x' } as unknown as Parameters<EntityStore['count']>[1];
    await expectGatewayError(store.count('t', badOp), InvalidQueryError);
    await expectGatewayError(
      store.count('t', { field: 'n', op: 'gt', value: true as unknown as number }),
      InvalidQueryError,
    );
    await expectGatewayError(store.count('t', { field: 'id', op: 'eq', value: 'x' }), InvalidQueryError);
    await expectGatewayError(
      store.query('t', { order: [{ field: 'name; DROP', direction: 'desc' }] }),
      InvalidQueryError,
    );
    await expectGatewayError(store.query('t', { limit: -1 }), InvalidQueryError);
    await expectGatewayError(store.query('t', { offset: 1.5 }), InvalidQueryError);
  });

  it.skipIf(skip)('orders (ties on id), pages and counts', async () => {
    const store = await open('order');
    const ratings = [1500, 1600, 1400, 1600, 1550, 1450];
    const made: Entity[] = [];
    for (const [i, rating] of ratings.entries()) made.push(await store.create('item', { name: `n${i}`, rating }));
    await store.create('item', { name: 'unrated' });
    await store.create('other', { rating: 9999 });

    const top = await store.query('item', { order: [{ field: 'rating', direction: 'desc' }], limit: 3, count: true });
    expect(top.items.map((e) => e.data.rating)).toEqual([1600, 1600, 1550]);
    expect(top.items[0]!.id).toBeLessThan(top.items[1]!.id); // tie broken on id ascending
    expect(top.total).toBe(7);

    const all = await store.query('item', { order: [{ field: 'rating', direction: 'desc' }] });
    expect(all.items.map((e) => e.data.name).at(-1)).toBe('unrated'); // missing sorts smallest
    const asc = await store.query('item', { order: [{ field: 'rating' }] });
    expect(asc.items[0]!.data.name).toBe('unrated');
    expect(asc.total).toBeUndefined();

    const page2 = await store.query('item', { order: [{ field: 'rating', direction: 'desc' }], offset: 3, limit: 3 });
    expect(page2.items.map((e) => e.id)).toEqual(all.items.slice(3, 6).map((e) => e.id));
    const byName = await store.query('item', { order: [{ field: 'name', direction: 'desc' }], limit: 2 });
    expect(byName.items.map((e) => e.data.name)).toEqual(['unrated', 'n5']);
    const byId = await store.query('item', { order: [{ field: 'id', direction: 'desc' }], limit: 1 });
    expect(byId.items[0]!.data.name).toBe('unrated');
    const filtered = await store.query('item', {
      filter: { field: 'rating', op: 'gte', value: 1500 },
      order: [{ field: 'rating' }],
      limit: 2,
      count: true,
    });
    expect(filtered.items.map((e) => e.data.rating)).toEqual([1500, 1550]);
    expect(filtered.total).toBe(4);
    expect((await store.query('item', { limit: 0, count: true })).total).toBe(7);
  });

  it.skipIf(skip)('expands references by id, in arrays and nested paths, up to max_depth', async () => {
    const budgets: unknown[] = [];
    const store = await open('expand', { maxDepth: 2, observer: { onBudgetExceeded: (e) => budgets.push(e) } });
    const org = await store.create('org', { name: 'Acme' });
    const alice = await store.create('user', { name: 'alice', org: org.id });
    const bob = await store.create('user', { name: 'bob', org: org.id });
    const post = await store.create('post', {
      title: 'hi',
      author: alice.id,
      reviewers: [bob.id, 987654, alice.id],
      meta: { editor: bob.id },
      ghost: 987654,
    });

    const got = await store.get<Record<string, unknown>>('post', post.id, {
      expand: ['author.org', 'reviewers', 'meta.editor', 'ghost'],
    });
    const data = got!.data as Record<string, unknown> & { author: Entity; reviewers: Array<Entity | null> };
    expect(data.author).toMatchObject({ id: alice.id, type: 'user', data: { name: 'alice' } });
    expect(data.author.data.org).toEqual(org);
    expect(data.reviewers.map((r) => r?.data.name ?? null)).toEqual(['bob', null, 'alice']);
    expect((data.reviewers[0]!.data as { org: unknown }).org).toBe(org.id); // not asked for
    expect((data.meta as { editor: Entity }).editor.id).toBe(bob.id);
    expect(data.ghost).toBeNull();

    const listed = await store.query('user', { expand: ['org'] });
    expect(listed.items.map((u) => (u.data.org as Entity).data.name)).toEqual(['Acme', 'Acme']);

    const err = await expectGatewayError(
      store.get('post', post.id, { expand: ['author.org.owner'] }),
      QueryBudgetExceededError,
    );
    expect(err.details).toEqual({ budget: 'max_depth', limit: 2, requested: 3 });
    expect(err.code).toBe('query_budget_exceeded');
    expect(err.kind).toBe('bad_request');
    await expectGatewayError(store.query('post', { expand: ['a.b.c'] }), QueryBudgetExceededError);
    await expectGatewayError(store.query('post', { expand: ['bad path'] }), InvalidQueryError);
    expect(budgets).toEqual([
      { budget: 'max_depth', type: 'post', limit: 2, requested: 3 },
      { budget: 'max_depth', type: 'post', limit: 2, requested: 3 },
    ]);
  });

  it.skipIf(skip)('enforces max_entities on limits, getMany and returned plus expanded entities', async () => {
    const budgets: Array<{ budget: string }> = [];
    const store = await open('budget', { maxEntities: 5, observer: { onBudgetExceeded: (e) => budgets.push(e) } });
    expect(store.limits).toEqual({ maxEntities: 5, maxDepth: 3 });
    const target = await store.create('t', { name: 'target' });
    for (let i = 0; i < 3; i++) await store.create('r', { ref: target.id });

    const err = await expectGatewayError(store.query('r', { limit: 6 }), QueryBudgetExceededError);
    expect(err.details).toEqual({ budget: 'max_entities', limit: 5, requested: 6 });
    expect(err.message).toContain('max_entities');
    expect((await store.query('r')).items).toHaveLength(3); // default limit: max_entities
    // 3 returned + 3 expanded = 6 > 5
    const over = await expectGatewayError(store.query('r', { expand: ['ref'] }), QueryBudgetExceededError);
    expect(over.details).toEqual({ budget: 'max_entities', limit: 5, requested: 6 });
    expect((await store.query('r', { expand: ['ref'], limit: 2 })).items).toHaveLength(2); // 4 fits
    await expectGatewayError(store.getMany('t', [1, 2, 3, 4, 5, 6]), QueryBudgetExceededError);
    expect(budgets.map((b) => b.budget)).toEqual(['max_entities', 'max_entities', 'max_entities']);
  });

  it.skipIf(skip)('200 concurrent read-modify-write transactions from two stores add exactly 200', async () => {
    const conflicts: unknown[] = [];
    const one = await open('concurrency', { observer: { onConflict: (e) => conflicts.push(e) } });
    const two = await open('concurrency', { observer: { onConflict: (e) => conflicts.push(e) } });
    const e = await one.create('item', { rating: 0 });
    const before = await one.lastSeq();
    await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        (i % 2 ? one : two).transaction(
          async (tx) => {
            const cur = await tx.get<{ rating: number }>('item', e.id);
            await tx.update('item', e.id, { rating: cur!.data.rating + 1 });
          },
          { retries: 50 },
        ),
      ),
    );
    const after = await one.get<{ rating: number }>('item', e.id);
    expect(after!.data.rating).toBe(200);
    expect(after!.version).toBe(201);
    // The change log stayed gap-free and in version order under contention.
    const changes = await one.changesSince(before, 1000);
    expect(changes.map((c) => c.seq)).toEqual(Array.from({ length: 200 }, (_, i) => before + i + 1));
    expect(changes.map((c) => c.version)).toEqual(Array.from({ length: 200 }, (_, i) => i + 2));
    expect(changes.map((c) => c.data!.rating)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    // Every conflict (if any: it depends on the interleaving) was reported for this item, with the
    // version its writer held and a newer one; none escaped as a failure (all 200 landed above).
    for (const c of conflicts) {
      expect(c).toMatchObject({ type: 'item', id: e.id });
      expect((c as { actual: number }).actual).toBeGreaterThan((c as { expected: number }).expected);
    }
  });

  it.skipIf(skip)('two writers holding the same version: exactly one wins', async () => {
    const store = await open('race');
    const e = await store.create('item', { n: 0 });
    const results = await Promise.allSettled(
      [1, 2, 3, 4].map((n) => store.update('item', e.id, { n }, { ifVersion: e.version })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results.filter((r) => r.status === 'rejected')) {
      expect((r as PromiseRejectedResult).reason).toBeInstanceOf(VersionConflictError);
    }
    expect((await store.get('item', e.id))!.version).toBe(2);
  });

  it.skipIf(skip)('retries a transaction after a conflict, and rolls back what the failed attempt wrote', async () => {
    const conflicts: unknown[] = [];
    const store = await open('retry', { observer: { onConflict: (e) => conflicts.push(e) } });
    const e = await store.create('item', { n: 0 });
    let attempts = 0;
    const result = await store.transaction(
      async (tx) => {
        attempts++;
        await tx.create('log', { attempt: attempts });
        const cur = await tx.get<{ n: number }>('item', e.id);
        // The first attempt carries a stale version, as if read before someone else's write.
        return tx.update('item', e.id, { n: cur!.data.n + 1 }, { ifVersion: attempts === 1 ? 0 : cur!.version });
      },
      { retries: 1 },
    );
    expect(attempts).toBe(2);
    expect(result!.data).toEqual({ n: 1 });
    expect(conflicts).toEqual([{ type: 'item', id: e.id, expected: 0, actual: 1 }]);
    expect((await store.query('log')).items.map((l) => l.data.attempt)).toEqual([2]);

    // Without retries the conflict reaches the caller and nothing of the attempt stays.
    await expectGatewayError(
      store.transaction(async (tx) => {
        await tx.create('log', { attempt: 'lost' });
        await tx.update('item', e.id, { n: 99 }, { ifVersion: 1 });
      }),
      VersionConflictError,
    );
    expect(await store.count('log')).toBe(1);
    // A tx used after its transaction ended refuses to run.
    let leaked: Parameters<Parameters<EntityStore['transaction']>[0]>[0] | undefined;
    await store.transaction(async (tx) => {
      leaked = tx;
    });
    await expect(leaked!.get('item', e.id)).rejects.toThrow(/transaction is over/);
  });

  // Needs a writer that runs while the transaction is open: on SQLite the file lock makes every
  // other writer wait for the transaction, so this interleaving cannot happen there.
  it.skipIf(skip || backend.name === 'sqlite')(
    'a write after the transaction read makes its update conflict and retry',
    async () => {
      const conflicts: unknown[] = [];
      const store = await open('staleread', { observer: { onConflict: (e) => conflicts.push(e) } });
      const t = `${stores.prefix(backend.name, 'staleread')}entities`;
      const e = await store.create('item', { n: 0 });
      let attempts = 0;
      await store.transaction(
        async (tx) => {
          attempts++;
          const cur = await tx.get<{ n: number }>('item', e.id);
          // Another writer (raw SQL, outside the store's lock) commits after this read.
          if (attempts === 1) await store.sql.exec(`UPDATE ${t} SET version = version + 1 WHERE id = $1`, [e.id]);
          await tx.update('item', e.id, { n: cur!.data.n + 1 });
        },
        { retries: 3 },
      );
      expect(attempts).toBe(2);
      expect(conflicts).toEqual([{ type: 'item', id: e.id, expected: 1, actual: 2 }]);
      expect(await store.get('item', e.id)).toMatchObject({ version: 3, data: { n: 1 } });
    },
  );

  it.skipIf(skip)('writes an ordered, gap-free change log in the mutations’ transactions', async () => {
    const store = await open('changelog');
    expect(await store.lastSeq()).toBe(0);
    const a = await store.create('item', { n: 1 }, { key: 'a' });
    await store.update('item', a.id, { n: 2 });
    await expect(
      store.transaction(async (tx) => {
        await tx.create('item', { n: 'rolled back' });
        throw new Error('abort');
      }),
    ).rejects.toThrow('abort');
    const b = await store.upsertByKey('item', 'b', { n: 3 });
    await store.delete('item', a.id);
    const changes = await store.changesSince(0);
    expect(changes.map((c) => [c.seq, c.op, c.id, c.version, c.key])).toEqual([
      [1, 'create', a.id, 1, 'a'],
      [2, 'update', a.id, 2, 'a'],
      [3, 'create', b.id, 1, 'b'],
      [4, 'delete', a.id, 2, 'a'],
    ]);
    expect(changes[1]!.data).toEqual({ n: 2 });
    expect(changes[3]!.data).toBeNull();
    expect(changes[0]!.at).toBe(a.created_at);
    expect(await store.lastSeq()).toBe(4);
    expect((await store.changesSince(1, 2)).map((c) => c.seq)).toEqual([2, 3]);
    expect(await store.changesSince(4)).toEqual([]);
    await expectGatewayError(store.changesSince(-1), InvalidQueryError);
  });

  it.skipIf(skip)('replays a primary’s log into a replica exactly once, across restarts', async () => {
    const primary = await open('primary');
    const made: Entity[] = [];
    for (let i = 0; i < 6; i++) made.push(await primary.create(i % 2 ? 'a' : 'b', { i, tags: [i] }, { key: `k${i}` }));
    await primary.update('a', made[1]!.id, { i: 100 });
    await primary.upsertByKey('b', 'k0', { i: 200 });
    await primary.delete('b', made[4]!.id);
    const newest = await primary.create('a', { last: true });
    await primary.delete('a', newest.id); // the highest id is gone on the primary
    const log = await primary.changesSince(0);

    const replicaEvents: MutationEvent[] = [];
    let replica = await open('replica', { observer: { onMutation: (e) => replicaEvents.push(e) } });
    replica.setReadOnly('replica of primary');
    // Half, then a restart, then everything twice.
    for (const c of log.slice(0, 5)) expect(await replica.applyChange(c)).toBe('applied');
    await replica.close();
    replica = await open('replica');
    replica.setReadOnly('replica of primary');
    const outcomes = [];
    for (const c of [...log, ...log]) outcomes.push(await replica.applyChange(c));
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(log.length - 5);
    expect(outcomes.filter((o) => o === 'skipped')).toHaveLength(log.length + 5);
    expect(replicaEvents.filter((e) => e.rowsAffected === 1)).toHaveLength(5);

    const dump = async (s: EntityStore) => {
      const out: Entity[] = [];
      for (const type of ['a', 'b']) out.push(...(await s.query(type, { order: [{ field: 'id' }] })).items);
      return out;
    };
    expect(await dump(replica)).toEqual(await dump(primary));
    expect(await replica.lastSeq()).toBe(await primary.lastSeq());
    expect(await replica.changesSince(0)).toEqual(log);

    // A record past the next one would lose the records between.
    const gap: ChangeRecord = { ...log.at(-1)!, seq: log.length + 2 };
    const err = await expectGatewayError(replica.applyChange(gap), ReplicationGapError);
    expect(err.details).toEqual({ expected_seq: log.length + 1, seq: log.length + 2 });
    await expectGatewayError(replica.applyChange({ ...log[0]!, seq: 0 }), InvalidQueryError);

    // Promoted, the replica never reuses one of the primary's ids.
    replica.setReadOnly(undefined);
    const own = await replica.create('a', { mine: true });
    expect(own.id).toBeGreaterThan(newest.id);
    expect((await replica.changesSince(log.length)).map((c) => c.seq)).toEqual([log.length + 1]);
  });

  it.skipIf(skip)('refuses every mutation while read-only, with the reason', async () => {
    const store = await open('readonly');
    const e = await store.create('item', { n: 1 }, { key: 'k' });
    store.setReadOnly('replica of db-1');
    const attempts = [
      store.create('item', { n: 2 }),
      store.update('item', e.id, { n: 2 }),
      store.upsertByKey('item', 'k', { n: 2 }),
      store.delete('item', e.id),
      store.transaction((tx) => tx.update('item', e.id, { n: 2 })),
    ];
    for (const attempt of attempts) {
      const err = await expectGatewayError(attempt, ReadOnlyStoreError);
      expect(err.kind).toBe('forbidden');
      expect(err.code).toBe('read_only');
      expect(err.message).toContain('replica of db-1');
    }
    expect((await store.get('item', e.id))!.version).toBe(1); // reads still work
    expect(await store.transaction((tx) => tx.count('item'))).toBe(1);
    store.setReadOnly(undefined);
    expect((await store.update('item', e.id, { n: 3 }))!.version).toBe(2);
  });

  it.skipIf(skip)('reports type and storage sizes', async () => {
    const store = await open('stats');
    for (let i = 0; i < 20; i++) await store.create('big', { text: 'x'.repeat(200), i });
    await store.create('small', { i: 1 });
    const types = await store.typeStats();
    expect(types.map((t) => [t.type, t.count])).toEqual([
      ['big', 20],
      ['small', 1],
    ]);
    expect(types[0]!.bytes).toBeGreaterThan(20 * 200);
    expect(types[1]!.bytes).toBeGreaterThan(0);
    expect(types[1]!.bytes).toBeLessThan(100);
    const storage = await store.storageStats();
    expect(storage.dataBytes).toBeGreaterThan(4000);
    expect(storage.indexBytes).toBeGreaterThan(0);
    if (backend.name === 'sqlite') expect(storage.walBytes).toBeGreaterThan(0);
    else expect(storage.walBytes).toBeUndefined();
  });

  it.skipIf(skip)('tells the observer about every operation, with shapes free of values', async () => {
    const queries: QueryEvent[] = [];
    const mutations: MutationEvent[] = [];
    const store = await open('observer', {
      observer: {
        onQuery: (e) => queries.push(e),
        onMutation: (e) => {
          mutations.push(e);
          throw new Error('a broken observer does not break the store');
        },
      },
    });
    const e = await store.create('item', { name: 'secret-name', rating: 1 }, { requestId: 'req-1' });
    await store.update('item', e.id, { name: 'secret-name', rating: 2 });
    await store.upsertByKey('item', 'k', { rating: 3 });
    await store.get('item', e.id);
    await store.getByKey('item', 'k');
    await store.getMany('item', [e.id]);
    const q = await store.query('item', {
      filter: {
        all: [
          { field: 'name', op: 'contains', value: 'secret' },
          { field: 'rating', op: 'gt', value: 0 },
        ],
      },
      order: [{ field: 'rating', direction: 'desc' }],
      limit: 10,
      requestId: 'req-2',
    });
    expect(q.items).toHaveLength(1);
    await store.count('item');
    await store.update('item', e.id, { rating: 9 }, { ifVersion: 1 }).catch(() => {});
    await store.delete('item', e.id);

    expect(mutations.map((m) => [m.kind, m.rowsAffected, m.error])).toEqual([
      ['create', 1, undefined],
      ['update', 1, undefined],
      ['upsert', 1, undefined],
      ['update', 0, 'version_conflict'],
      ['delete', 1, undefined],
    ]);
    expect(mutations[0]!.requestId).toBe('req-1');
    expect(queries.map((x) => x.kind)).toEqual(['get', 'get', 'get', 'query', 'count']);
    const query = queries[3]!;
    expect(query.shape).toBe('query item filter(all(name contains, rating gt)) order(rating desc) limit');
    expect(query.shape).not.toContain('secret');
    expect(query).toMatchObject({ type: 'item', rowsReturned: 1, requestId: 'req-2' });
    for (const event of [...queries, ...mutations]) expect(event.durationMs).toBeGreaterThanOrEqual(0);
    expect(queries[4]).toMatchObject({ kind: 'count', entitiesScanned: 2, shape: 'count item' });
  });

  it.skipIf(skip)('serves a leaderboard over 100k entities from the rating index', async () => {
    const log: Array<{ sql: string; params: readonly SqlParam[] }> = [];
    const store = await open('leaderboard', { indexes: { player: ['rating'] } }, (db) => recording(db, log));
    const t = `${stores.prefix(backend.name, 'leaderboard')}entities`;
    const at = new Date().toISOString();
    if (backend.name === 'sqlite') {
      await store.sql.exec(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
          INSERT INTO ${t} (type, version, created_at, updated_at, data)
          SELECT CASE WHEN x % 10 = 0 THEN 'other' ELSE 'player' END, 1, $1, $1, json_object('rating', (x * 7919) % 100003)
          FROM n`,
        [at],
      );
    } else {
      await store.sql.exec(
        `INSERT INTO ${t} (type, version, created_at, updated_at, data)
          SELECT CASE WHEN x % 10 = 0 THEN 'other' ELSE 'player' END, 1, $1, $1, jsonb_build_object('rating', (x * 7919) % 100003)
          FROM generate_series(1, 100000) AS x`,
        [at],
      );
    }
    await store.sql.exec(`ANALYZE ${t}`);
    log.length = 0;
    const board = await store.query<{ rating: number }>('player', {
      order: [{ field: 'rating', direction: 'desc' }],
      limit: 100,
    });
    const ratings = board.items.map((e) => e.data.rating);
    expect(ratings).toHaveLength(100);
    expect(ratings).toEqual([...ratings].sort((x, y) => y - x));
    const select = log.find((l) => l.sql.startsWith('SELECT'))!;
    const plan = (
      await store.sql.query<Record<string, string>>(
        `${backend.name === 'sqlite' ? 'EXPLAIN QUERY PLAN' : 'EXPLAIN'} ${select.sql}`,
        select.params,
      )
    )
      .map((row) => row.detail ?? row['QUERY PLAN'])
      .join('\n');
    expect(plan).toMatch(/_ix_rating_/);
    if (backend.name === 'postgres') expect(plan).not.toMatch(/Seq Scan/);
    else expect(plan).not.toMatch(/^SCAN /m);
  });
});

describe('SQLite options', () => {
  it('sets the page cache from cache_size_mb', async () => {
    const db = await openSqlDatabase({ driver: 'sqlite', path: join(stores.dir, 'cache.db'), cache_size_mb: 8 });
    const [row] = await db.query<{ cache_size: number }>('PRAGMA cache_size');
    expect(row!.cache_size).toBe(-8192);
    await db.close();
  });
});
