/**
 * `sessions: shared`: clients share the server's one set of subscriptions. A client cannot end
 * another's subscription: the server sees a subscribe for the first subscriber of a URI and an
 * unsubscribe only when the last one leaves, by unsubscribing or because its session ended. Its
 * cancellations reach the server only for its own calls. A recording MCP child shows what the
 * server received.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { RpcSessions, RpcUpstream } from '../../runtime/upstreams/types.ts';

const child = join(import.meta.dirname, '../fixtures/recording-mcp-child.mjs');

describe('stdio upstream, sessions: shared — subscriptions and cancellations per client', () => {
  let up: RpcUpstream;
  let sessions: RpcSessions;
  let n = 0;
  beforeAll(async () => {
    up = createUpstream(
      'rec',
      { kind: 'stdio', command: process.execPath, args: [child], sessions: 'shared' },
      { logger: silentLogger, configDir: process.cwd() },
    ) as RpcUpstream;
    await up.ready(10000);
    sessions = up.sessions as RpcSessions;
  });
  afterAll(() => up.close());

  const call = (session: string | undefined, method: string, params: Record<string, unknown>) =>
    up.call({ jsonrpc: '2.0', id: ++n, method, params }, { session });

  interface Received {
    id?: unknown;
    method: string;
    params?: Record<string, unknown>;
  }
  /** Everything the server received. */
  async function log(): Promise<Received[]> {
    const answer = await up.call({ jsonrpc: '2.0', id: 'look', method: 'debug/received' });
    return (answer!.result as { received: Received[] }).received;
  }

  /** What the server received since the last look, as `method uri` lines. */
  let seen = 0;
  async function received(): Promise<string[]> {
    const all = await log();
    const fresh = all.slice(seen);
    seen = all.length;
    return fresh
      .filter((m) => m.method.startsWith('resources/') || m.method === 'notifications/cancelled')
      .map((m) => `${m.method} ${JSON.stringify(m.params?.uri ?? m.params?.requestId)}`);
  }

  it("B's unsubscribe of A's URI never reaches the server; the last subscriber's does", async () => {
    const a = await sessions.open();
    const b = await sessions.open();
    await received();
    expect(await call(a, 'resources/subscribe', { uri: 'demo://x' })).toMatchObject({ result: {} });
    expect(await received()).toEqual(['resources/subscribe "demo://x"']);
    // B never subscribed: answered here, the server keeps A's subscription.
    expect(await call(b, 'resources/unsubscribe', { uri: 'demo://x' })).toMatchObject({ result: {} });
    expect(await received()).toEqual([]);
    // B subscribes too (answered here), then A leaves: still B's.
    await call(b, 'resources/subscribe', { uri: 'demo://x' });
    await call(a, 'resources/unsubscribe', { uri: 'demo://x' });
    expect(await received()).toEqual([]);
    // The last one out unsubscribes at the server.
    await call(b, 'resources/unsubscribe', { uri: 'demo://x' });
    expect(await received()).toEqual(['resources/unsubscribe "demo://x"']);
    await sessions.end(a);
    await sessions.end(b);
  });

  it('an ended session releases what only it subscribed to', async () => {
    const a = await sessions.open();
    const b = await sessions.open();
    await call(a, 'resources/subscribe', { uri: 'demo://only-a' });
    await call(a, 'resources/subscribe', { uri: 'demo://both' });
    await call(b, 'resources/subscribe', { uri: 'demo://both' });
    await received();
    await sessions.end(a);
    await new Promise((r) => setTimeout(r, 100));
    expect(await received()).toEqual(['resources/unsubscribe "demo://only-a"']);
    await sessions.end(b);
    await new Promise((r) => setTimeout(r, 100));
    expect(await received()).toEqual(['resources/unsubscribe "demo://both"']);
  });

  it("a cancellation reaches the server as the wire id of the client's own call, and only then", async () => {
    const a = await sessions.open();
    const b = await sessions.open();
    await received();
    // A's slow call has id 7 (A's numbering); B's client numbers alike.
    const slow = up.call({ jsonrpc: '2.0', id: 7, method: 'debug/slow', params: { ms: 300 } }, { session: a });
    await new Promise((r) => setTimeout(r, 50));
    const cancel = (session: string) =>
      up.call({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } }, { session });
    await cancel(b);
    await up.call({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 7 } }); // sessionless
    const all = await log();
    const wireId = all.filter((m) => m.method === 'debug/slow').pop()?.id;
    expect(typeof wireId).toBe('number');
    expect(all.filter((m) => m.method === 'notifications/cancelled')).toEqual([]);
    await cancel(a);
    await new Promise((r) => setTimeout(r, 50));
    const cancels = (await log()).filter((m) => m.method === 'notifications/cancelled');
    expect(cancels).toEqual([{ method: 'notifications/cancelled', params: { requestId: wireId } }]);
    expect(await slow).toMatchObject({ id: 7, result: { slow: true } });
    seen = 0;
    await received();
    await sessions.end(a);
    await sessions.end(b);
  });
});
