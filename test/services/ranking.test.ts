/**
 * The ranking service (configs/ranking.yaml) as a client sees it, on SQLite and on PostgreSQL:
 * the seed's record shapes, FastAPI-style paths and errors, Elo updates, leaderboards, pair
 * suggestions, the OpenAPI description and documentation pages, and bad input that never gets
 * a 500 nor changes stored data.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eloUpdate } from '../../plugins/elo/elo.ts';
import { backends, type ComparisonJson, type EntityJson, type Ranking, startRanking } from './ranking-helpers.ts';

for (const { driver, skip } of backends) {
  describe.skipIf(skip)(`ranking service on ${driver}`, () => {
    let r: Ranking;
    const created: EntityJson[] = [];
    beforeAll(async () => {
      r = await startRanking(driver);
    });
    afterAll(() => r?.close());

    const entity = (body: Record<string, unknown>) => r.json<EntityJson>('POST', '/entities/', body);
    const compare = (a: number, b: number, w: number) =>
      r.json<ComparisonJson>('POST', '/comparisons/', { entity1_id: a, entity2_id: b, selected_entity_id: w });

    it('answers health and readiness', async () => {
      expect(await r.json('GET', '/health')).toMatchObject({ status: 'healthy' });
      expect(await r.json('GET', '/health/ready')).toEqual({ status: 'ready', checks: { database: 'ok' } });
    });

    it('refuses pair suggestions with fewer than 2 entities (400)', async () => {
      for (const path of [
        '/mab/next-comparison/',
        '/next-comparison/',
        '/dissimilar-entities/',
        '/similar-entities/',
      ]) {
        const res = await r.get(path);
        expect(res.status, path).toBe(400);
        expect((await res.json()).detail).toMatch(/at least 2/i);
      }
    });

    it('creates entities with the seed shape, rating 1500', async () => {
      const a = await entity({
        name: 'Apple pie',
        description: 'A sweet apple dessert',
        image_urls: ['https://img/a.png'],
      });
      expect(a).toEqual({
        id: a.id,
        name: 'Apple pie',
        description: 'A sweet apple dessert',
        image_urls: ['https://img/a.png'],
        rating: 1500,
      });
      expect(Number.isInteger(a.id)).toBe(true);
      const b = await entity({ name: 'Banana bread', description: 'Sweet banana loaf' });
      expect(b).toMatchObject({ image_urls: [], rating: 1500 });
      const c = await entity({ name: 'Grilled steak' });
      expect(c.description).toBeNull();
      const d = await entity({ name: 'Tomato soup', description: 'Savory and warm' });
      created.push(a, b, c, d);
      // Trailing slash or not, as FastAPI routers accept.
      expect(await r.json('GET', `/entities/${a.id}`)).toEqual(a);
      expect((await r.json<EntityJson[]>('GET', '/entities')).length).toBe(4);
    });

    it('lists with skip, limit and a case-insensitive search over name and description', async () => {
      const all = await r.json<EntityJson[]>('GET', '/entities/');
      expect(all.map((e) => e.id)).toEqual(created.map((e) => e.id));
      expect((await r.json<EntityJson[]>('GET', '/entities/?skip=1&limit=2')).map((e) => e.id)).toEqual([
        created[1]!.id,
        created[2]!.id,
      ]);
      expect((await r.json<EntityJson[]>('GET', '/entities/?search=SWEET')).map((e) => e.name)).toEqual([
        'Apple pie',
        'Banana bread',
      ]);
      expect((await r.json<EntityJson[]>('GET', '/entities/?search=steak')).map((e) => e.name)).toEqual([
        'Grilled steak',
      ]);
      expect(await r.json('GET', '/entities/?search=%25')).toEqual([]);
      expect(await r.json('GET', `/entities/?search=${encodeURIComponent("' OR '1'='1")}`)).toEqual([]);
    });

    it('updates only the fields given, and deletes', async () => {
      const c = created[2]!;
      const updated = await r.json<EntityJson>('PATCH', `/entities/${c.id}`, { description: 'Char-grilled beef' });
      expect(updated).toEqual({ ...c, description: 'Char-grilled beef' });
      expect(await r.json('PUT', `/entities/${c.id}/`, { name: 'Steak' })).toEqual({ ...updated, name: 'Steak' });
      expect(await r.json('PATCH', `/entities/${c.id}`, {})).toEqual({ ...updated, name: 'Steak' });
      const tmp = await entity({ name: 'Temporary 50%_off' });
      // LIKE wildcards are plain characters in a search.
      expect(
        (await r.json<EntityJson[]>('GET', `/entities/?search=${encodeURIComponent('%_')}`)).map((e) => e.id),
      ).toEqual([tmp.id]);
      expect(await r.json('DELETE', `/entities/${tmp.id}`)).toEqual(tmp);
      expect(await r.json('GET', `/entities/${tmp.id}`, undefined, 404)).toEqual({
        detail: `Entity ${tmp.id} not found`,
      });
      expect(await r.json('DELETE', `/entities/${tmp.id}`, undefined, 404)).toEqual({
        detail: `Entity ${tmp.id} not found`,
      });
      created[2] = { ...updated, name: 'Steak' };
    });

    it('records a comparison: both Elo ratings move by K(S − E), K = 32', async () => {
      const [a, b] = created;
      const cmp = await compare(a!.id, b!.id, a!.id);
      expect(cmp).toEqual({
        id: cmp.id,
        entity1_id: a!.id,
        entity2_id: b!.id,
        selected_entity_id: a!.id,
        created_at: cmp.created_at,
      });
      expect(new Date(cmp.created_at).toISOString()).toBe(cmp.created_at);
      expect((await r.json<EntityJson>('GET', `/entities/${a!.id}`)).rating).toBe(1516);
      expect((await r.json<EntityJson>('GET', `/entities/${b!.id}`)).rating).toBe(1484);
      expect(await r.json('GET', `/comparisons/${cmp.id}`)).toEqual(cmp);
      const second = await compare(b!.id, created[3]!.id, created[3]!.id);
      expect(second.id).toBeGreaterThan(cmp.id);
      const [rb, rd] = eloUpdate(1484, 1500, 0);
      expect((await r.json<EntityJson>('GET', `/entities/${b!.id}`)).rating).toBe(rb);
      expect((await r.json<EntityJson>('GET', `/entities/${created[3]!.id}`)).rating).toBe(rd);
    });

    it('lists comparisons, filtered by entity', async () => {
      const [a, b, , d] = created;
      const all = await r.json<ComparisonJson[]>('GET', '/comparisons/');
      expect(all).toHaveLength(2);
      expect(
        (await r.json<ComparisonJson[]>('GET', `/comparisons/?entity_id=${a!.id}`)).map((c) => c.selected_entity_id),
      ).toEqual([a!.id]);
      expect(await r.json('GET', `/comparisons/?entity_id=${b!.id}`)).toEqual(all);
      expect(await r.json('GET', `/comparisons/?entity_id=${d!.id}&skip=0&limit=1`)).toEqual([all[1]]);
      expect(await r.json('GET', '/comparisons?skip=5')).toEqual([]);
    });

    it('refuses bad comparisons with documented statuses', async () => {
      const [a, b] = created;
      const same = await r.json<{ detail: Array<{ loc: unknown[]; type: string }> }>(
        'POST',
        '/comparisons/',
        { entity1_id: a!.id, entity2_id: a!.id, selected_entity_id: a!.id },
        422,
      );
      expect(same.detail[0]).toMatchObject({ loc: ['body', 'entity2_id'], type: 'value_error' });
      const neither = await r.json<{ detail: Array<{ loc: unknown[] }> }>(
        'POST',
        '/comparisons/',
        { entity1_id: a!.id, entity2_id: b!.id, selected_entity_id: 999999 },
        422,
      );
      expect(neither.detail[0]!.loc).toEqual(['body', 'selected_entity_id']);
      expect(
        await r.json(
          'POST',
          '/comparisons/',
          { entity1_id: a!.id, entity2_id: 999999, selected_entity_id: a!.id },
          404,
        ),
      ).toEqual({ detail: 'Entity 999999 not found' });
      const missing = await r.json<{ detail: Array<{ loc: unknown[]; type: string }> }>(
        'POST',
        '/comparisons/',
        { entity1_id: 1 },
        422,
      );
      expect(missing.detail.map((d) => d.loc.join('.'))).toEqual(['body.entity2_id', 'body.selected_entity_id']);
    });

    it('ranks by Elo, highest first, and by Bradley–Terry with reproducible bootstrap intervals', async () => {
      const board = await r.json<EntityJson[]>('GET', '/leaderboard/');
      expect(board).toHaveLength(4);
      for (let i = 1; i < board.length; i++) expect(board[i - 1]!.rating).toBeGreaterThanOrEqual(board[i]!.rating);
      expect(await r.json('GET', '/leaderboard?skip=1&limit=2')).toEqual(board.slice(1, 3));
      type Bt = EntityJson & { bt_rating: number; bt_ci_lower: number; bt_ci_upper: number; games: number };
      const bt = await r.json<Bt[]>('GET', '/leaderboard/?method=bradley-terry&bootstrap=50&seed=3');
      expect(bt).toHaveLength(4);
      for (let i = 1; i < bt.length; i++) expect(bt[i - 1]!.bt_rating).toBeGreaterThanOrEqual(bt[i]!.bt_rating);
      for (const row of bt) {
        expect(row.bt_ci_lower).toBeLessThanOrEqual(row.bt_rating + 1e-6);
        expect(row.bt_ci_upper).toBeGreaterThanOrEqual(row.bt_rating - 1e-6);
      }
      expect(bt.find((x) => x.id === created[2]!.id)!.games).toBe(0);
      expect(await r.json('GET', '/leaderboard/?method=bradley-terry&bootstrap=50&seed=3')).toEqual(bt);
      const plain = await r.json<Bt[]>('GET', '/leaderboard/?method=bradley-terry');
      expect(plain[0]!.bt_ci_lower).toBeUndefined();
    });

    it('suggests pairs: UCB cold start first, content similarity by TF-IDF', async () => {
      // Steak has no comparison yet: cold start puts it first.
      const mab = await r.json<{ entity1: EntityJson; entity2: EntityJson }>('GET', '/mab/next-comparison/');
      expect(Object.keys(mab).sort()).toEqual(['entity1', 'entity2']);
      expect(mab.entity1.id).toBe(created[2]!.id);
      expect(mab.entity2.id).not.toBe(created[2]!.id);
      // Apple pie and Banana bread share "sweet": the most similar pair.
      const similar = await r.json<{ entity1: EntityJson; entity2: EntityJson; similarity: number }>(
        'GET',
        '/similar-entities/',
      );
      expect([similar.entity1.name, similar.entity2.name]).toEqual(['Apple pie', 'Banana bread']);
      expect(similar.similarity).toBeGreaterThan(0);
      const dissimilar = await r.json<{ similarity: number }>('GET', '/dissimilar-entities/');
      expect(dissimilar.similarity).toBe(0);
      const next = await r.json<{ entity1: EntityJson; entity2: EntityJson }>('GET', '/next-comparison/');
      expect(next.entity1.id).toBe(created[2]!.id);
    });

    it('keeps the bandit state, and takes manual updates', async () => {
      const [a, b] = created;
      const states = await r.json<Array<Record<string, number>>>('GET', `/mab/state/?entity_id=${a!.id}`);
      expect(states).toEqual([
        expect.objectContaining({
          entity1_id: a!.id,
          entity2_id: b!.id,
          comparisons: 1,
          entity1_wins: 1,
          entity2_wins: 0,
        }),
      ]);
      const after = await r.json<Record<string, number>>('POST', '/mab/update/', {
        entity1_id: b!.id,
        entity2_id: a!.id,
        selected_entity_id: b!.id,
      });
      expect(after).toMatchObject({
        entity1_id: a!.id,
        entity2_id: b!.id,
        comparisons: 2,
        entity1_wins: 1,
        entity2_wins: 1,
      });
      // A manual update changes no rating and stores no comparison.
      expect((await r.json<EntityJson>('GET', `/entities/${a!.id}`)).rating).toBe(1516);
      expect(await r.json<unknown[]>('GET', '/comparisons/')).toHaveLength(2);
    });

    it('publishes an OpenAPI 3.1 description whose schemas match the answers', async () => {
      const doc = await r.json<{
        openapi: string;
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
        components: { schemas: Record<string, unknown> };
      }>('GET', '/openapi.json');
      expect(doc.openapi).toBe('3.1.0');
      for (const p of [
        '/health',
        '/health/ready',
        '/entities/',
        '/entities/{entity_id}',
        '/comparisons/',
        '/comparisons/{comparison_id}',
        '/leaderboard/',
        '/next-comparison/',
        '/dissimilar-entities/',
        '/mab/next-comparison/',
        '/mab/update/',
        '/mab/state/',
      ]) {
        expect(doc.paths[p], p).toBeDefined();
      }
      expect(Object.keys(doc.paths['/entities/{entity_id}']!).sort()).toEqual(['delete', 'get', 'patch', 'put']);
      // Plurals as people write them (Swagger UI groups by tag and shows the summary).
      const list = doc.paths['/entities/']!.get as unknown as { tags: string[]; summary: string };
      expect(list).toMatchObject({ tags: ['entities'], summary: 'List Entities' });
      const compare = doc.paths['/comparisons/']!.post as unknown as { tags: string[] };
      expect(compare.tags).toEqual(['comparisons']);
      expect(JSON.stringify(doc)).not.toMatch(/entitys|Entitys/);
      // Auth is off: the user routes are not documented.
      expect(doc.paths['/token']).toBeUndefined();
      expect(doc.paths['/openapi.json']).toBeUndefined();
      // Every $ref resolves.
      for (const m of JSON.stringify(doc).matchAll(/"#\/components\/schemas\/([^"]+)"/g)) {
        expect(doc.components.schemas[m[1]!], m[1]).toBeDefined();
      }
      const ajv = new Ajv2020({ strict: false });
      addFormats.default(ajv);
      for (const [name, schema] of Object.entries(doc.components.schemas))
        ajv.addSchema(schema as object, `#/components/schemas/${name}`);
      const check = (name: string, value: unknown) => {
        const ok = ajv.validate(`#/components/schemas/${name}`, value);
        expect(ok, `${name}: ${ajv.errorsText()}`).toBe(true);
      };
      for (const e of await r.json<unknown[]>('GET', '/entities/')) check('Entity', e);
      for (const c of await r.json<unknown[]>('GET', '/comparisons/')) check('Comparison', c);
      check('HTTPValidationError', await r.json('GET', '/entities/?limit=0', undefined, 422));
    });

    it('serves interactive documentation at /docs', async () => {
      const res = await r.get('/docs');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
      const html = await res.text();
      expect(html).toContain('/docs/swagger-ui-bundle.js');
      const init = await (await r.get('/docs/swagger-initializer.js')).text();
      expect(init).toContain('"/openapi.json"');
      const bundle = await r.get('/docs/swagger-ui-bundle.js');
      expect(bundle.status).toBe(200);
      expect((await bundle.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
      expect((await r.get('/docs/../package.json')).status).toBe(404);
      expect((await r.get('/docs/nope.js')).status).toBe(404);
    });

    it('has no user routes while AUTH_ENABLED is off', async () => {
      expect(
        (
          await r.send('POST', '/token', 'username=a&password=b', {
            'content-type': 'application/x-www-form-urlencoded',
          })
        ).status,
      ).toBe(404);
      expect((await r.get('/users/me')).status).toBe(404);
      expect(
        (await r.send('POST', '/users/', { username: 'abc', email: 'a@b.co', password: 'password1' })).status,
      ).toBe(404);
    });

    describe('bad input', () => {
      const snapshot = async () =>
        JSON.stringify([
          await r.json('GET', '/entities/?limit=1000'),
          await r.json('GET', '/comparisons/?limit=1000'),
          await r.json('GET', '/mab/state/?limit=1000'),
        ]);

      it('gets a clear 4xx, never a 500, and changes nothing', async () => {
        const id = created[0]!.id;
        const other = created[1]!.id;
        const deep = `${'{"a":'.repeat(100)}1${'}'.repeat(100)}`;
        const cases: Array<[string, string, unknown, number]> = [
          ['POST', '/entities/', {}, 422],
          ['POST', '/entities/', { name: 5 }, 422],
          ['POST', '/entities/', { name: 'x'.repeat(201) }, 422],
          ['POST', '/entities/', { name: 'a', description: 'x'.repeat(1001) }, 422],
          ['POST', '/entities/', { name: 'a', image_urls: Array(11).fill('u') }, 422],
          ['POST', '/entities/', { name: 'a', image_urls: [1] }, 422],
          ['POST', '/entities/', { name: 'a', image_urls: 'u' }, 422],
          ['POST', '/entities/', { name: 'a', rating: 9999 }, 422],
          ['POST', '/entities/', { name: 'a', id: 3 }, 422],
          ['POST', '/entities/', { name: 'a', unknown_field: 1 }, 422],
          ['POST', '/entities/', { name: 'a', comparisons: 5 }, 422],
          ['POST', '/entities/', [], 422],
          ['POST', '/entities/', 'null', 422],
          ['POST', '/entities/', '"Robert\'); DROP TABLE entities;--"', 422],
          ['POST', '/entities/', 'not json', 400],
          ['POST', '/entities/', '', 400],
          ['POST', '/entities/', deep, 400],
          ['POST', '/entities/', { name: 'a', description: 'x'.repeat(70_000) }, 413],
          ['GET', '/entities/?limit=0', undefined, 422],
          ['GET', '/entities/?limit=1001', undefined, 422],
          ['GET', '/entities/?limit=abc', undefined, 422],
          ['GET', '/entities/?limit=99999999999999999999', undefined, 422],
          ['GET', '/entities/?skip=-1', undefined, 422],
          ['GET', '/entities/?skip=1e3', undefined, 422],
          ['GET', `/entities/?search=${'x'.repeat(201)}`, undefined, 422],
          ['GET', `/entities/${encodeURIComponent('1;DROP TABLE x')}`, undefined, 422],
          ['GET', '/entities/1.5', undefined, 422],
          ['GET', '/entities/-1', undefined, 404],
          ['GET', '/entities/0', undefined, 404],
          ['GET', '/entities/99999999999999999999', undefined, 422],
          ['PATCH', `/entities/${id}`, { rating: 1 }, 422],
          ['PATCH', `/entities/${id}`, { name: null }, 422],
          ['PATCH', `/entities/${id}`, { name: '' }, 422],
          ['PATCH', `/entities/${id}`, { name: 'ok', image_urls: [null] }, 422],
          ['PATCH', `/entities/${id}`, 'not json', 400],
          ['PATCH', '/entities/999999', { name: 'x' }, 404],
          ['DELETE', '/entities/abc', undefined, 422],
          ['DELETE', '/entities/999999', undefined, 404],
          ['POST', '/comparisons/', {}, 422],
          ['POST', '/comparisons/', { entity1_id: String(id), entity2_id: other, selected_entity_id: id }, 422],
          ['POST', '/comparisons/', { entity1_id: id + 0.5, entity2_id: other, selected_entity_id: id }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: other, selected_entity_id: null }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: other, selected_entity_id: true }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: other, selected_entity_id: id, extra: 1 }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: id, selected_entity_id: id }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: other, selected_entity_id: 12345 }, 422],
          ['POST', '/comparisons/', { entity1_id: id, entity2_id: 999999, selected_entity_id: id }, 404],
          ['POST', '/comparisons/', { entity1_id: -1, entity2_id: other, selected_entity_id: other }, 404],
          ['GET', '/comparisons/?entity_id=x', undefined, 422],
          ['GET', '/comparisons/?entity_id=1%20OR%201=1', undefined, 422],
          ['GET', '/comparisons/?limit=5000', undefined, 422],
          ['GET', '/comparisons/abc', undefined, 422],
          ['GET', '/comparisons/999999', undefined, 404],
          ['GET', '/leaderboard/?method=foo', undefined, 422],
          ['GET', '/leaderboard/?bootstrap=-1', undefined, 422],
          ['GET', '/leaderboard/?method=bradley-terry&bootstrap=100000', undefined, 422],
          ['GET', '/leaderboard/?limit=0', undefined, 422],
          ['POST', '/mab/update/', { entity1_id: id, entity2_id: id, selected_entity_id: id }, 422],
          ['POST', '/mab/update/', { entity1_id: id, entity2_id: 999999, selected_entity_id: id }, 404],
          ['PUT', '/leaderboard/', undefined, 405],
          ['GET', '/nope', undefined, 404],
        ];
        const before = await snapshot();
        for (const [method, path, body, status] of cases) {
          const res = await r.send(method, path, body);
          const text = await res.text();
          expect(res.status, `${method} ${path.slice(0, 60)} ${text.slice(0, 200)}`).toBe(status);
          const parsed = JSON.parse(text) as { detail: unknown };
          expect(parsed.detail, `${method} ${path.slice(0, 60)}`).toBeDefined();
          if (status === 422) {
            const detail = parsed.detail as Array<{ loc: unknown[]; msg: string; type: string }>;
            expect(Array.isArray(detail) && detail.length > 0, text).toBe(true);
            for (const d of detail)
              expect(d).toMatchObject({ loc: expect.any(Array), msg: expect.any(String), type: expect.any(String) });
          }
        }
        expect(await snapshot()).toBe(before);
      });

      it('never answers arbitrary bodies with anything but a documented status', async () => {
        const documented = [200, 400, 404, 413, 422];
        const body = fc.oneof(
          fc.json({ maxDepth: 4 }),
          fc.string({ maxLength: 100 }),
          fc
            .record(
              {
                entity1_id: fc.oneof(fc.integer(), fc.anything()),
                entity2_id: fc.oneof(fc.integer(), fc.anything()),
                selected_entity_id: fc.oneof(fc.integer(), fc.anything()),
                name: fc.anything(),
                description: fc.anything(),
                image_urls: fc.anything(),
              },
              { requiredKeys: [] },
            )
            .map((o) => JSON.stringify(o)),
        );
        await fc.assert(
          fc.asyncProperty(
            fc.constantFrom('/comparisons/', '/mab/update/', `/entities/${created[0]!.id}`),
            body,
            async (path, b) => {
              const res = await r.send(path.startsWith('/entities') ? 'PATCH' : 'POST', path, b);
              await res.arrayBuffer();
              return documented.includes(res.status);
            },
          ),
          { numRuns: 150 },
        );
      });
    });
  });
}
