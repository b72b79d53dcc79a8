/**
 * The shipped typed proxy (configs/typed-proxy.yaml, strict pipeline) with its upstream replaced
 * by two MCP reference servers over streamable HTTP as endpoints of one `jsonrpc` upstream: the
 * official SDK client's sessions work end to end (each request of a session must reach the server
 * that holds it, or that server answers it does not know the session), and when one server dies
 * new sessions go to the other.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { endpointTag, sessionTagSecretVariable } from '../../runtime/upstreams/session-tags.ts';
import { freePort, startEverythingHttp, stop } from '../helpers/servers.ts';

let servers: ChildProcess[] = [];
let urls: string[] = [];
let svc: StartedService;
const tagSecret = 'typed-proxy-endpoints-test-secret';
const clients: Client[] = [];

beforeAll(async () => {
  const ports = [await freePort(), await freePort()];
  servers = await Promise.all(ports.map((p) => startEverythingHttp(p)));
  urls = ports.map((p) => `http://127.0.0.1:${p}/mcp`);
  // The deployment's secret (it keys the endpoint tags in session ids): set here to read them back.
  process.env[sessionTagSecretVariable] = tagSecret;
  svc = await startService('configs/typed-proxy.yaml', {
    set: [
      `upstreams.everything={kind: jsonrpc, protocol: mcp, endpoints: [${urls.map((u) => `{url: "${u}"}`).join(', ')}], health_check: {interval_ms: 500, jsonrpc_method: ping}}`,
    ],
    env: { PROXY_AUDIT_PATH: join(mkdtempSync(join(tmpdir(), 'typed-proxy-endpoints-')), 'audit.db') },
    warmupMs: 15000,
  });
  delete process.env[sessionTagSecretVariable];
}, 60_000);

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {});
  await svc?.close();
  for (const s of servers) await stop(s);
});

async function connect(): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'typed-proxy-endpoints', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/`));
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

const echo = async (c: Client, message: string) =>
  (await c.callTool({ name: 'echo', arguments: { message } })).content as Array<{ text: string }>;

/** The endpoint a client's session id names (its tag: the HMAC of the endpoint's URL). */
const endpointOf = (sessionId: string | undefined) =>
  urls.findIndex((u) => endpointTag(tagSecret, u) === sessionId?.slice(0, 8));

describe('typed proxy with two MCP endpoints', () => {
  it('sessions spread over both and every request of each reaches its own server; a dead one sends new sessions to the other', async () => {
    const sessions = [];
    for (let n = 0; n < 4; n++) sessions.push(await connect());
    expect(new Set(sessions.map((s) => endpointOf(s.transport.sessionId)))).toEqual(new Set([0, 1]));
    for (const [n, s] of sessions.entries()) {
      expect((await s.client.listTools()).tools.map((t) => t.name)).toContain('echo');
      for (let k = 0; k < 3; k++)
        expect(await echo(s.client, `c${n}-${k}`)).toEqual([{ type: 'text', text: `Echo: c${n}-${k}` }]);
    }

    await stop(servers[1] as ChildProcess);
    for (const s of sessions) {
      if (endpointOf(s.transport.sessionId) === 0)
        expect(await echo(s.client, 'still')).toEqual([{ type: 'text', text: 'Echo: still' }]);
      else await expect(echo(s.client, 'gone')).rejects.toThrow();
    }
    for (let n = 0; n < 3; n++) {
      const fresh = await connect();
      expect(endpointOf(fresh.transport.sessionId)).toBe(0);
      expect(await echo(fresh.client, 'fresh')).toEqual([{ type: 'text', text: 'Echo: fresh' }]);
    }
  });
});
