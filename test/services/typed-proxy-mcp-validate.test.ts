/**
 * Issue 29, items 4, 8 and a low: the typed proxy (configs/typed-proxy.yaml) in front of the MCP
 * reference server, as an attacker with the service port would probe it.
 *
 * - Malformed MCP messages are answered at once (400, JSON-RPC -32602 naming the path), checked
 *   against the schema of the protocol version the client's session negotiated; a 500 KiB tool
 *   name is refused before the audit trail (no record at all).
 * - Audit records name a session only when the gateway issued it; a claimed id is kept apart and
 *   bounded.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../plugins/audit-chain/api.ts';
import { sha256Hex } from '../../runtime/index.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { openChain } from '../fixtures/audit-helpers.ts';

const config = join(import.meta.dirname, '../../configs/typed-proxy.yaml');
const dir = mkdtempSync(join(tmpdir(), 'typed-proxy-mcp-validate-'));
const auditPath = join(dir, 'audit.db');

let svc: StartedService;
beforeAll(async () => {
  svc = await startService(config, { warmupMs: 15000, env: { PROXY_AUDIT_PATH: auditPath } });
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function post(body: unknown, headers: Record<string, string> = {}, path = '/') {
  const res = await fetch(`${svc.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    // The server left without an answer would keep the client for the call timeout (30 s): fail first.
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  return { res, status: res.status, body: text ? JSON.parse(text) : undefined };
}

const toolsCall = (params: unknown, id: number | string = 1) => ({ jsonrpc: '2.0', id, method: 'tools/call', params });

async function records(): Promise<AuditRecord[]> {
  const chain = await openChain({ backend: 'sqlite', path: auditPath });
  try {
    return (await chain.value.query({ limit: 1000 })).records;
  } finally {
    await chain.close?.();
  }
}

/** Opens a session with a raw initialize asking for `version`; returns its id and the version agreed. */
async function initialize(version: string) {
  const init = await post({
    jsonrpc: '2.0',
    id: 'init',
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'probe', version: '1.0.0' } },
  });
  return { init, id: init.res.headers.get('mcp-session-id'), agreed: init.body?.result?.protocolVersion };
}

async function liveSessions(): Promise<number> {
  return (await (await fetch(`${svc.url}/health`)).json()).sessions.live as number;
}

describe('malformed MCP requests are answered at once, never by the server', () => {
  it('tools/call with params [1, 2] (the server never answered it): 400, -32602, $.params', async () => {
    const { status, body } = await post(toolsCall([1, 2], 41));
    expect(status).toBe(400);
    expect(body).toMatchObject({
      jsonrpc: '2.0',
      id: 41,
      error: {
        code: -32602,
        message: 'Invalid params: $.params must be object',
        data: { path: '$.params', method: 'tools/call', protocol_version: '2025-06-18' },
      },
    });
  });

  it('a name that is an array or an object, or no params: the path, not the server’s zod dump', async () => {
    for (const params of [
      { name: ['echo'], arguments: {} },
      { name: { a: 1 }, arguments: {} },
    ]) {
      const { status, body } = await post(toolsCall(params));
      expect(status).toBe(400);
      expect(body.error).toMatchObject({ code: -32602, data: { path: '$.params.name' } });
      expect(body.error.message).toBe('Invalid params: $.params.name must be string');
    }
    const missing = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call' });
    expect(missing.status).toBe(400);
    expect(missing.body.error).toMatchObject({ code: -32602, data: { path: '$.params', problem: 'is required' } });
  });

  it('an id the protocol does not allow (null, 1.5, 1e400) is -32600 at $.id', async () => {
    for (const id of ['null', '1.5', '1e400']) {
      const { status, body } = await post(`{"jsonrpc":"2.0","id":${id},"method":"ping"}`);
      expect(status).toBe(400);
      expect(body.error).toMatchObject({ code: -32600, data: { path: '$.id' } });
    }
  });

  it('a method no version defines still goes to the server, once its envelope is valid', async () => {
    const unknown = await post({ jsonrpc: '2.0', id: 9, method: 'foo/bar', params: {} });
    expect(unknown.status).toBe(200);
    expect(unknown.body.error).toMatchObject({ code: -32601, message: 'Method not found' });
    const arrayParams = await post({ jsonrpc: '2.0', id: 10, method: 'foo/bar', params: [1] });
    expect(arrayParams.status).toBe(400);
    expect(arrayParams.body.error).toMatchObject({ code: -32602, data: { path: '$.params' } });
  });

  it('a 500 KiB tool name is refused before the audit trail: no record is written (POST / and /mcp)', async () => {
    const name = 'x'.repeat(500 * 1024);
    const before = (await records()).length;
    const rpc = await post(toolsCall({ name, arguments: {} }, 'huge'));
    expect(rpc.status).toBe(400);
    expect(rpc.body.error).toMatchObject({
      code: -32602,
      message: 'Invalid params: $.params.name must NOT have more than 128 characters',
    });
    // Answered with the path, not an echo of the name.
    expect(JSON.stringify(rpc.body).length).toBeLessThan(1000);
    const typed = await post({ type: 'tools/call', tool: name, arguments: {} }, {}, '/mcp');
    expect(typed.status).toBe(400);
    expect(typed.body).toMatchObject({ error: 'bad_request', details: { path: '$.params.name' } });
    expect((await records()).length).toBe(before);
    // A name of the protocol's 128 characters is not refused for its length (the server answers).
    const longest = await post(toolsCall({ name: 'n'.repeat(128), arguments: {} }));
    expect(longest.status).not.toBe(400);
  });
});

describe('each session is checked against the version its initialize negotiated', () => {
  const opened: string[] = [];
  afterAll(async () => {
    for (const id of opened) await fetch(`${svc.url}/`, { method: 'DELETE', headers: { 'mcp-session-id': id } });
  });

  it('an SDK client (2025-11-25) works; in its session 2025-11-25 decides (notifications/cancelled without requestId)', async () => {
    const client = new Client({ name: 'mcp-validate-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/`));
    await client.connect(transport);
    try {
      expect(transport.protocolVersion).toBe('2025-11-25');
      const echoed = await client.callTool({ name: 'echo', arguments: { message: 'checked' } });
      expect((echoed.content as Array<{ text: string }>)[0]?.text).toContain('checked');
      const headers = { 'mcp-session-id': transport.sessionId as string, 'mcp-protocol-version': '2025-11-25' };
      // requestId became optional in 2025-11-25 (a task's cancellation): accepted.
      const cancel = await post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: {} }, headers);
      expect(cancel.status).toBe(202);
      const bad = await post(toolsCall({ name: 7 }), headers);
      expect(bad.status).toBe(400);
      expect(bad.body.error.data).toMatchObject({ path: '$.params.name', protocol_version: '2025-11-25' });
    } finally {
      await transport.terminateSession().catch(() => {});
      await client.close();
    }
  });

  it('a 2025-06-18 session: 2025-06-18 decides, whatever version its header claims later', async () => {
    const { init, id, agreed } = await initialize('2025-06-18');
    expect(init.status).toBe(200);
    expect(agreed).toBe('2025-06-18');
    opened.push(id as string);
    for (const header of ['2025-06-18', '2025-11-25']) {
      const cancel = await post(
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: {} },
        { 'mcp-session-id': id as string, 'mcp-protocol-version': header },
      );
      expect(cancel.status).toBe(400);
      expect(cancel.body.error).toMatchObject({
        code: -32602,
        data: { path: '$.params.requestId', problem: 'is required', protocol_version: '2025-06-18' },
      });
    }
    const echo = await post(toolsCall({ name: 'echo', arguments: { message: 'in 2025-06-18' } }), {
      'mcp-session-id': id as string,
      'mcp-protocol-version': '2025-06-18',
    });
    expect(echo.status).toBe(200);
    expect(echo.body.result.content[0].text).toContain('in 2025-06-18');
  });

  it('an MCP-Protocol-Version the proxy has no schema for is 400 -32022 with the supported list, as the transport requires', async () => {
    const { id } = await initialize('2025-06-18');
    opened.push(id as string);
    const res = await post(
      { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      { 'mcp-session-id': id as string, 'mcp-protocol-version': '1999-01-01' },
    );
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: -32022,
      message: 'Unsupported protocol version',
      data: { requested: '1999-01-01' },
    });
    expect(res.body.error.data.supported).toContain('2025-11-25');
    expect(res.body.error.data.supported).toContain('2026-07-28');
  });

  it('an initialize the server answers with a version that has no schema (2024-10-07) opens no session', async () => {
    const live = await liveSessions();
    const { init, id } = await initialize('2024-10-07');
    expect(init.status).toBe(400);
    expect(id).toBeNull();
    expect(init.body.error).toMatchObject({
      code: -32602,
      message: 'Unsupported protocol version',
      data: { requested: '2024-10-07', supported: ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'] },
    });
    expect(await liveSessions()).toBe(live);
  });
});

describe('the audit trail: sessions the gateway issued only, every field bounded', () => {
  const refusedCall = async (headers: Record<string, string>) => {
    const res = await post(toolsCall({ name: 'get-env', arguments: {} }), headers);
    expect(res.status).toBe(403); // refused by policy, before the proxy stage
    const requestId = res.res.headers.get('x-proxy-request-id') as string;
    const found = (await records()).filter((r) => r.request_id === requestId);
    expect(found.length).toBeGreaterThan(0);
    return found;
  };

  it('a refused request claiming an arbitrary Mcp-Session-Id is not recorded under it', async () => {
    for (const r of await refusedCall({ 'mcp-session-id': 'alice-session-guessed' })) {
      expect(r.details.session).toBeUndefined();
      expect(r.details.claimed_session).toBe('alice-session-guessed');
    }
  });

  it('a refused request in a session the gateway issued is recorded under it', async () => {
    const { id } = await initialize('2025-06-18');
    try {
      for (const r of await refusedCall({ 'mcp-session-id': id as string, 'mcp-protocol-version': '2025-06-18' })) {
        expect(r.details.session).toBe(id);
        expect(r.details.claimed_session).toBeUndefined();
      }
    } finally {
      await fetch(`${svc.url}/`, { method: 'DELETE', headers: { 'mcp-session-id': id as string } });
    }
  });

  it('an 8 KiB claimed session id is cut to 128 characters, its length and sha256 kept', async () => {
    const claimed = 's'.repeat(8000);
    const found = await refusedCall({ 'mcp-session-id': claimed });
    for (const r of found) {
      expect(r.details.claimed_session).toBe(`${'s'.repeat(128)}…`);
      expect(r.details.cut).toMatchObject({
        '$.details.claimed_session': { length: 8000, sha256: sha256Hex(claimed) },
      });
      expect(JSON.stringify(r).length).toBeLessThan(2000);
    }
    const chain = await openChain({ backend: 'sqlite', path: auditPath });
    try {
      expect((await chain.value.verify()).chain_intact).toBe(true);
    } finally {
      await chain.close?.();
    }
  });
});
