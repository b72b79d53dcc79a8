/**
 * `balance: consistent-hash` through a real service: requests with the same `hash_on` header
 * value reach the same endpoint; when that endpoint is out only its keys move (to the next
 * endpoint on the ring), and they come back when it returns; requests without the value are
 * spread round-robin.
 */
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';

const opened: Array<{ close(): unknown }> = [];

afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
});

interface Fixture {
  url: string;
  healthy: boolean;
}

async function fixture(name: string): Promise<Fixture> {
  const server: Server = createServer((req, res) => {
    req.resume();
    req.once('end', () => {
      if (req.url === '/health') res.writeHead(f.healthy ? 200 : 503).end();
      else res.writeHead(200, { 'x-endpoint': name }).end('ok');
    });
  });
  const f: Fixture = { url: await listenLocal(server), healthy: true };
  opened.push({ close: () => closeNow(server) });
  return f;
}

async function service(list: Fixture[]): Promise<StartedService> {
  const file = writeServiceFile(`service: hashed
listen: { port: 0 }
upstreams:
  api:
    kind: http
    endpoints: [${list.map((f) => `{ url: "${f.url}" }`).join(', ')}]
    balance: consistent-hash
    hash_on: { header: X-User }
    health_check: { interval_ms: 100, path: /health }
routes:
  - match: { method: GET, path: /x }
    pipeline: [{ proxy: { upstream: api, forward_headers: [x-user] } }]
`);
  const svc = await startService(file, { warmupMs: 2000 });
  opened.push(svc);
  return svc;
}

async function endpointFor(svc: StartedService, user?: string): Promise<string> {
  const res = await fetch(`${svc.url}/x`, { headers: user ? { 'x-user': user } : {} });
  await res.text();
  return res.headers.get('x-endpoint') as string;
}

const users = Array.from({ length: 40 }, (_, n) => `user-${n}`);

async function placement(svc: StartedService): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const u of users) out.set(u, await endpointFor(svc, u));
  return out;
}

describe('consistent-hash balancing', () => {
  it('keeps each key on one endpoint; an endpoint out moves only its keys, which come back with it', async () => {
    const list = [await fixture('a'), await fixture('b'), await fixture('c')];
    const svc = await service(list);
    const before = await placement(svc);
    expect(new Set(before.values()).size).toBe(3);
    expect(await placement(svc)).toEqual(before);

    (list[1] as Fixture).healthy = false;
    await until(async () => {
      const p = await placement(svc);
      return [...p.values()].every((e) => e !== 'b');
    }, 5000);
    const during = await placement(svc);
    for (const u of users) if (before.get(u) !== 'b') expect(during.get(u)).toBe(before.get(u));

    (list[1] as Fixture).healthy = true;
    await until(async () => [...(await placement(svc)).values()].includes('b'), 5000);
    expect(await placement(svc)).toEqual(before);

    // Without the header: round-robin.
    const spread = [];
    for (let n = 0; n < 6; n++) spread.push(await endpointFor(svc));
    expect(new Set(spread).size).toBe(3);
  });
});
