/**
 * The endpoint tag in the MCP session ids of a balanced `jsonrpc` upstream is keyed (issue 29,
 * item 9): an HMAC of the endpoint's URL under SWITCHYARD_SESSION_TAG_SECRET, no longer a hash
 * anyone recomputes. Through the typed proxy (configs/typed-proxy.yaml) in front of MCP servers
 * over streamable HTTP (the official SDK's transport):
 * - the attacker's offline search that found the endpoint's URL from the old tag (every port of
 *   the address, hashed) no longer finds it;
 * - gateways sharing the secret tag alike: a session opened through one continues through the
 *   other; one with another secret does not know the session (the client initializes again);
 * - a cluster's workers share one secret drawn by their primary, so a session works whichever
 *   worker a connection reaches;
 * - a secret too short to key anything stops the start, naming the variable.
 */
import { mkdtempSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { hash32 } from '../../runtime/upstreams/hash-ring.ts';
import { endpointTag, sessionTagSecretVariable } from '../../runtime/upstreams/session-tags.ts';
import { type McpEndpoint, mcpEndpoint } from '../helpers/mcp-endpoint.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'endpoint-tags-'));
let endpoints: McpEndpoint[] = [];
const services: StartedService[] = [];
let n = 0;

const upstreamOf = (list: McpEndpoint[]) =>
  `upstreams.everything={kind: jsonrpc, protocol: mcp, endpoints: [${list.map((e) => `{url: "${e.url}"}`).join(', ')}]}`;

/** The typed proxy in front of the endpoints, keyed with `secret` (undefined: the process's own). */
async function gateway(secret: string | undefined, list = endpoints): Promise<StartedService> {
  if (secret === undefined) delete process.env[sessionTagSecretVariable];
  else process.env[sessionTagSecretVariable] = secret;
  try {
    const svc = await startService('configs/typed-proxy.yaml', {
      set: [upstreamOf(list)],
      env: { PROXY_AUDIT_PATH: join(dir, `audit-${n++}.db`) },
      warmupMs: 2000,
    });
    services.push(svc);
    return svc;
  } finally {
    delete process.env[sessionTagSecretVariable];
  }
}

/** One JSON-RPC POST on a connection of its own (a cluster hands each to the next worker). */
function rpc(
  url: string,
  body: unknown,
  session?: string,
): Promise<{ status: number; session?: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/`,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
          ...(session ? { 'mcp-session-id': session } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, session: res.headers['mcp-session-id'] as string, text }),
        );
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

async function initialize(url: string): Promise<string> {
  const res = await rpc(url, {
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'tags', version: '1' } },
  });
  expect(res.status).toBe(200);
  expect(res.session).toMatch(/^[0-9a-f]{8}\./);
  await rpc(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, res.session);
  return res.session as string;
}

/**
 * The endpoint's own id in a session id the client sees: `<tag>.<id>.<owner MAC>` (the proxy binds
 * each session to its subject, plugins/proxy/session-binding.ts).
 */
const endpointSessionOf = (session: string) => session.slice(9, -17);

const ping = (url: string, session: string) => rpc(url, { jsonrpc: '2.0', id: 7, method: 'ping' }, session);

beforeAll(async () => {
  endpoints = [await mcpEndpoint('e1'), await mcpEndpoint('e2')];
});

afterAll(async () => {
  for (const s of services) await s.close();
  for (const e of endpoints) e.close();
});

describe('keyed endpoint tags', () => {
  it("the attacker's offline search of the endpoint's URL no longer finds it", async () => {
    const svc = await gateway(undefined);
    const session = await initialize(svc.url);
    const tag = session.slice(0, 8);
    const holder = endpoints.find((e) => e.sessions.has(endpointSessionOf(session))) as McpEndpoint;
    const { hostname, port, pathname } = new URL(holder.url);
    // Every port of the address, as the unkeyed tag was computed: the real one used to match.
    const found: number[] = [];
    for (let p = 1; p <= 65535; p++) {
      if (hash32(`http://${hostname}:${p}${pathname}`).toString(16).padStart(8, '0') === tag) found.push(p);
    }
    expect(found).not.toContain(Number(port));
    // The session itself works (its requests reach the endpoint holding it).
    expect((await ping(svc.url, session)).status).toBe(200);
  }, 90_000);

  it('the tag is the HMAC under the deployment secret: a session continues through another gateway with it, not one without', async () => {
    const secret = 'deployment-secret-0123456789abcdef';
    const one = await gateway(secret);
    const two = await gateway(secret);
    const other = await gateway('another-secret-fedcba9876543210');
    const session = await initialize(one.url);
    const holder = endpoints.find((e) => e.sessions.has(endpointSessionOf(session))) as McpEndpoint;
    expect(session.slice(0, 8)).toBe(endpointTag(secret, holder.url));
    for (let i = 0; i < 4; i++) {
      const res = await ping(two.url, session);
      expect(res.status).toBe(200);
      expect(res.text).toContain('"result":{}');
    }
    // Another secret: the tag names none of its endpoints; the holder (if picked) or the other says 404.
    const foreign = await ping(other.url, session);
    expect(foreign.status).toBe(404);
  }, 90_000);

  it('a secret shorter than 16 characters stops the start, naming the variable', async () => {
    await expect(gateway('short')).rejects.toThrow(/SWITCHYARD_SESSION_TAG_SECRET must be at least 16 characters/);
  }, 90_000);
});

describe('a cluster without a configured secret', () => {
  let cluster: ServiceProcess | undefined;
  afterAll(async () => {
    await cluster?.stop();
  });

  it('every worker tags alike: each request of a session succeeds whichever worker its connection reaches', async () => {
    const env = { PROXY_AUDIT_PATH: join(dir, 'audit-cluster.db') };
    expect(process.env[sessionTagSecretVariable]).toBeUndefined();
    cluster = await spawnService('configs/typed-proxy.yaml', { workers: 2, env, set: [upstreamOf(endpoints)] });
    const session = await initialize(cluster.url);
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await ping(cluster.url, session)).status);
    expect(statuses).toEqual(Array(8).fill(200));
  }, 150_000); // a cluster of two cold workers started in 49 s on a loaded machine
});
