/**
 * Clients sharing one upstream channel (`sessions: shared`, and every stdio child): each picks its
 * own request ids, the gateway sends fresh wire ids. Whatever ids they pick and guess, a client's
 * cancellation reaches the upstream only as the wire id of its own call with that id in flight.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { scopeNotification } from '../../runtime/upstreams/notification-scope.ts';
import { PendingCalls } from '../../runtime/upstreams/pending.ts';

const owners = ['A', 'B', 'C'] as const;
const id = fc.oneof(fc.integer({ min: -2, max: 6 }), fc.constantFrom('1', '2', 'x', ''));
const step = fc.oneof(
  fc.record({ op: fc.constant('call' as const), owner: fc.constantFrom(...owners), id }),
  fc.record({ op: fc.constant('answer' as const), pick: fc.nat() }),
  fc.record({
    op: fc.constant('cancel' as const),
    owner: fc.constantFrom(...owners),
    id: fc.oneof(id, fc.constant(null)),
  }),
);

describe('notification scope (property)', () => {
  it('a cancellation names only its sender’s own call in flight, by that call’s wire id', () => {
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const pending = new PendingCalls('up');
        // What the model says is in flight: wire id -> (owner, caller id).
        const inFlight = new Map<number, { owner: string; id: unknown }>();
        for (const s of steps) {
          if (s.op === 'call') {
            // A client's ids are unique among its own calls in flight (JSON-RPC); across clients they collide freely.
            if ([...inFlight.values()].some((c) => c.owner === s.owner && c.id === s.id)) continue;
            const { wireId, response } = pending.add(s.id, { timeoutMs: 60_000, owner: s.owner });
            response.catch(() => {});
            inFlight.set(wireId, { owner: s.owner, id: s.id });
          } else if (s.op === 'answer') {
            const wires = [...inFlight.keys()];
            if (wires.length === 0) continue;
            const wire = wires[s.pick % wires.length]!;
            expect(pending.settle({ jsonrpc: '2.0', id: wire, result: {} })).toBe(true);
            inFlight.delete(wire);
          } else {
            const scoped = scopeNotification(
              { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: s.id, reason: 'r' } },
              (callerId) => pending.wireIdOf(s.owner, callerId),
            );
            const mine = [...inFlight.entries()].find(([, c]) => c.owner === s.owner && c.id === s.id);
            if (!mine) expect(scoped).toHaveProperty('drop');
            else {
              expect(scoped).toEqual({
                forward: {
                  jsonrpc: '2.0',
                  method: 'notifications/cancelled',
                  params: { requestId: mine[0], reason: 'r' },
                },
              });
            }
          }
        }
        pending.rejectAll(new Error('done'));
      }),
      { numRuns: 300 },
    );
  });

  it('progress from a client is dropped; other notifications pass unchanged', () => {
    const none = () => undefined;
    const progress = { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } };
    expect(scopeNotification(progress, none)).toHaveProperty('drop');
    const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
    expect(scopeNotification(initialized, none)).toEqual({ forward: initialized });
    for (const params of [undefined, null, [], 'x']) {
      expect(scopeNotification({ jsonrpc: '2.0', method: 'notifications/cancelled', params }, () => 1)).toHaveProperty(
        'drop',
      );
    }
  });
});
