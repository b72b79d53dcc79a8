/**
 * The typed proxy as an OAuth resource (PROXY_OAUTH=true) with its authorization server down
 * (issue 29, item 9): a burst of requests with tokens does not become a burst on the issuer. One
 * discovery is in flight at a time and its failure is remembered for `failure_cache_ms`, so 30
 * requests cost the issuer one discovery (its two metadata requests), and a key set that fails
 * is fetched once; every request meanwhile is refused 503 with Retry-After (fail closed, never
 * let through). Once the window ends and the issuer is back, tokens are accepted again.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type OAuthServer, startOAuthServer } from '../helpers/oauth-server.ts';
import { freePort, until } from '../helpers/servers.ts';

let upstream: Server;
let upstreamUrl: string;
let upstreamHits = 0;
const opened: Array<{ close(): Promise<unknown> }> = [];

/** A JSON-RPC upstream that answers every request with an empty result (and counts them). */
beforeAll(async () => {
  upstream = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      upstreamHits++;
      const msg = JSON.parse(body) as { id?: unknown };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: msg.id ?? null, result: { tools: [] } }));
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  for (const o of opened.reverse()) await o.close();
  await new Promise<void>((r) => upstream?.close(() => r()));
});

interface Setup {
  as: OAuthServer;
  svc: StartedService;
  resource: string;
}

/** The typed proxy with its JSON-RPC route's failure window set to `windowMs`. */
async function setup(windowMs: number, extra: string[] = []): Promise<Setup> {
  const as = await startOAuthServer();
  opened.push(as);
  const port = await freePort();
  const resource = `http://127.0.0.1:${port}/`;
  const svc = await startService('configs/typed-proxy.yaml', {
    set: [
      `listen.port=${port}`,
      `upstreams.everything={kind: jsonrpc, url: "${upstreamUrl}"}`,
      `routes.2.pipeline.0.oauth-bearer.failure_cache_ms=${windowMs}`,
      ...extra,
    ],
    env: { PROXY_OAUTH: 'true', PROXY_OAUTH_RESOURCE: resource, PROXY_OAUTH_ISSUER: as.issuer },
  });
  opened.push(svc);
  return { as, svc, resource };
}

const now = () => Math.floor(Date.now() / 1000);

function token(s: Setup): Promise<string> {
  return s.as.mint({ iss: s.as.issuer, sub: 'client:x', aud: s.resource, scope: 'mcp:tools', exp: now() + 300 });
}

function call(s: Setup, bearer: string): Promise<Response> {
  return fetch(`${s.svc.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
}

const discoveries = (as: OAuthServer) => as.paths.filter((p) => p.startsWith('/.well-known/')).length;

let long: Setup;
let keysDown: Setup;
let short: Setup;
beforeAll(async () => {
  long = await setup(60_000);
  keysDown = await setup(60_000);
  short = await setup(300);
}, 120_000);

describe('the issuer down', () => {
  it('30 requests (20 at once, then 10): one discovery reaches the issuer, every request is 503 with Retry-After', async () => {
    const s = long;
    s.as.down = 'all';
    const bearer = await token(s);
    const hits = upstreamHits;
    const burst = await Promise.all(Array.from({ length: 20 }, () => call(s, bearer)));
    const after: Response[] = [];
    for (let i = 0; i < 10; i++) after.push(await call(s, bearer));
    for (const res of [...burst, ...after]) {
      expect(res.status).toBe(503);
      const retryAfter = Number(res.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      await res.body?.cancel();
    }
    // RFC 8414 metadata, then OpenID discovery: one attempt, two requests; no key set asked for.
    expect(s.as.paths).toEqual(['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']);
    expect(upstreamHits).toBe(hits); // nothing went through unchecked
    const metrics = await (await fetch(`${s.svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_oauth_issuer_requests_total\{[^}]*kind="discovery"[^}]*\} 2\b/);
  });

  it('the key set down (metadata up): fetched once for 20 requests, all 503', async () => {
    const s = keysDown;
    s.as.down = 'jwks';
    const bearer = await token(s);
    const answers = await Promise.all(Array.from({ length: 20 }, () => call(s, bearer)));
    for (const res of answers) {
      expect(res.status).toBe(503);
      await res.body?.cancel();
    }
    for (let i = 0; i < 5; i++) expect((await call(s, bearer)).status).toBe(503);
    expect(s.as.paths.filter((p) => p === '/jwks')).toHaveLength(1);
    expect(discoveries(s.as)).toBe(1); // the metadata answered: discovery is not repeated
  });

  it('after the window the issuer is asked again, and once it is back tokens pass', async () => {
    const s = short;
    s.as.down = 'all';
    const bearer = await token(s);
    expect((await call(s, bearer)).status).toBe(503);
    expect(discoveries(s.as)).toBe(2);
    s.as.down = false;
    // Refused at once until the window ends, then checked against the issuer's keys again.
    await until(async () => (await call(s, bearer)).status === 200, 10_000);
    expect(discoveries(s.as)).toBe(3); // one more attempt found the metadata at the first path
    const forged = await s.as.mint(
      { iss: s.as.issuer, sub: 'client:x', aud: s.resource, scope: 'mcp:tools', exp: now() + 300 },
      { key: 'other' },
    );
    expect((await call(s, forged)).status).toBe(401);
  });
});
