import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { feedPort, serveFeed } from '../../plugins/replication/feed-server.ts';
import { Follower } from '../../plugins/replication/follower.ts';
import { type EntityStore, openEntityStore, openSqlDatabase } from '../../runtime/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-repl-'));
let n = 0;
const open = async () => openEntityStore(await openSqlDatabase({ driver: 'sqlite', path: join(dir, `s${n++}.db`) }));
const cleanup: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

async function contents(store: EntityStore) {
  const { items } = await store.query('item', { limit: 1000 });
  return items.map((e) => ({ id: e.id, version: e.version, data: e.data }));
}

async function until(check: () => Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('replication feed and follower', () => {
  it('a replica applies the change log in order; restarted, it resumes without loss or repeats', async () => {
    const primary = await open();
    const replica = await open();
    cleanup.push(
      () => primary.close(),
      () => replica.close(),
    );
    const bind = { host: '127.0.0.1', port: 0 };
    const release = await serveFeed(bind, { store: primary, token: 's3cret', pollMs: 10 });
    cleanup.push(release);
    const url = `http://127.0.0.1:${feedPort(bind)}`;
    const follow = () =>
      new Follower({ store: replica, primary: url, token: 's3cret', batch: 7, waitMs: 200, onError: () => {} });

    for (let i = 0; i < 40; i++) await primary.create('item', { i });
    let follower = follow();
    follower.start();
    await until(async () => (await replica.lastSeq()) === (await primary.lastSeq()));
    await follower.stop();

    // Writes while the replica is down: updates, deletes, creates.
    const { items } = await primary.query('item', { limit: 100 });
    for (const e of items.slice(0, 10)) await primary.update('item', e.id, { i: (e.data.i as number) + 100 });
    for (const e of items.slice(10, 15)) await primary.delete('item', e.id);
    for (let i = 0; i < 20; i++) await primary.create('item', { i: 1000 + i });

    follower = follow();
    follower.start();
    await until(async () => (await replica.lastSeq()) === (await primary.lastSeq()));
    expect(follower.state.connected).toBe(true);
    expect(follower.state.lagSeconds).toBe(0);
    await follower.stop();
    expect(await contents(replica)).toEqual(await contents(primary));
    expect(await replica.lastSeq()).toBe(await primary.lastSeq());
  });

  it('refuses a follower without the token, and the follower reports it', async () => {
    const primary = await open();
    const replica = await open();
    cleanup.push(
      () => primary.close(),
      () => replica.close(),
    );
    const bind = { host: '127.0.0.1', port: 0 };
    cleanup.push(await serveFeed(bind, { store: primary, token: 'right', pollMs: 10 }));
    const errors: string[] = [];
    const follower = new Follower({
      store: replica,
      primary: `http://127.0.0.1:${feedPort(bind)}`,
      token: 'wrong',
      batch: 10,
      waitMs: 50,
      onError: (e) => errors.push(e.message),
    });
    follower.start();
    await until(async () => errors.length > 0);
    await follower.stop();
    expect(follower.state.connected).toBe(false);
    expect(errors[0]).toMatch(/401/);
  });

  it('answers status, and refuses bad parameters with 400', async () => {
    const primary = await open();
    cleanup.push(() => primary.close());
    for (let i = 0; i < 3; i++) await primary.create('item', { i });
    const bind = { host: '127.0.0.1', port: 0 };
    cleanup.push(await serveFeed(bind, { store: primary, pollMs: 10 }));
    const url = `http://127.0.0.1:${feedPort(bind)}`;
    expect(await (await fetch(`${url}/v1/status`)).json()).toEqual({ role: 'primary', last_seq: 3 });
    const page = (await (await fetch(`${url}/v1/changes?after=1&limit=1`)).json()) as {
      changes: Array<{ seq: number }>;
      last_seq: number;
    };
    expect(page.changes.map((c) => c.seq)).toEqual([2]);
    expect(page.last_seq).toBe(3);
    for (const bad of ['after=-1', 'limit=0', 'wait_ms=abc', 'after=1e3']) {
      expect((await fetch(`${url}/v1/changes?${bad}`)).status, bad).toBe(400);
    }
    expect((await fetch(`${url}/v1/nothing`)).status).toBe(404);
    expect((await fetch(`${url}/v1/changes`, { method: 'POST' })).status).toBe(405);
  });
});
