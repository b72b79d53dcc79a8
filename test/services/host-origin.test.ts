/**
 * DNS rebinding and cross-site requests, against the typed proxy started from
 * configs/typed-proxy.yaml: the MCP conformance scenario `dns-rebinding-protection` (an
 * `initialize` with Host and Origin both set to the attacker's name must get a 4xx, the same with
 * the server's own localhost address a 2xx), a cross-site Origin, and JSON sent as a "simple"
 * (preflight-free) request. Only 127.0.0.1 is contacted; the Host header is what varies.
 */
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const config = join(import.meta.dirname, '../../configs/typed-proxy.yaml');

const initialize = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'rebinding-test', version: '1' } },
});

/** POSTs to 127.0.0.1:`port` with the given headers (Host included), returning status and body. */
function post(
  port: number,
  headers: Record<string, string>,
  body = initialize,
  path = '/',
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

describe('Host and Origin checks (typed proxy)', () => {
  let svc: StartedService;
  let port: number;
  beforeAll(async () => {
    svc = await startService(config, { warmupMs: 15000 });
    port = Number(new URL(svc.url).port);
  });
  afterAll(() => svc?.close());

  it('conformance dns-rebinding-protection: the attacker name is refused, localhost accepted', async () => {
    const attacker = 'evil.example.com';
    const refused = await post(port, { host: attacker, origin: `http://${attacker}` });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'forbidden' });
    for (const valid of [`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`]) {
      const ok = await post(port, { host: valid, origin: `http://${valid}` });
      expect(ok.status, valid).toBe(200);
    }
  });

  it('a rebinding Host alone (no Origin) is refused; an IP address as Host is accepted', async () => {
    expect((await post(port, { host: `rebind.attacker.test:${port}` })).status).toBe(403);
    expect((await post(port, { host: `10.1.2.3:${port}` })).status).toBe(200);
  });

  it('a cross-site Origin is refused even with a loopback Host', async () => {
    for (const origin of ['https://evil.example.com', 'null', 'http://10.0.0.9:8080']) {
      const res = await post(port, { host: `127.0.0.1:${port}`, origin });
      expect(res.status, origin).toBe(403);
    }
  });

  it('JSON as a simple request (text/plain, a form, no type) is 415', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', '']) {
      const res = await post(port, { host: `127.0.0.1:${port}`, 'content-type': type });
      expect(res.status, type || '(none)').toBe(415);
      // Refused before the JSON-RPC message is read: the route's HTTP-level error shape.
      expect(JSON.parse(res.body)).toMatchObject({ error: 'unsupported_media_type' });
    }
  });

  it('GET /health also checks Host (every route of the listener)', async () => {
    const res = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port, path: '/health', headers: { host: 'evil.example.com' } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      })
        .on('error', reject)
        .end();
    });
    expect(res).toBe(403);
  });
});

describe('hosts.allow and hosts.origins name what an exposed service accepts', () => {
  let svc: StartedService;
  let port: number;
  beforeAll(async () => {
    svc = await startService(config, {
      warmupMs: 15000,
      set: ['hosts.allow=[mcp.example.com]', 'hosts.origins=["https://app.example.com"]'],
    });
    port = Number(new URL(svc.url).port);
  });
  afterAll(() => svc?.close());

  it('a listed name and origin are accepted, others still refused', async () => {
    expect((await post(port, { host: 'MCP.example.com' })).status).toBe(200);
    expect((await post(port, { host: 'mcp.example.com', origin: 'https://app.example.com' })).status).toBe(200);
    expect((await post(port, { host: 'mcp.example.com', origin: 'https://other.example.com' })).status).toBe(403);
    expect((await post(port, { host: 'other.example.com' })).status).toBe(403);
  });
});
