/**
 * Issue 29, item 4: the typed proxy (configs/typed-proxy.yaml) checks every MCP message against
 * the protocol's schema before any upstream sees it. Its upstream here is a recording MCP server
 * (test/fixtures/recording-mcp-child.mjs, one child per client session, as the reference server
 * runs): 200 generated malformed messages sent in one client session are all answered 400 with a
 * JSON-RPC error naming the path, and the session's server received none of them (nor did any new
 * session open); generated valid messages still reach it, one each.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import {
  forwardedNotifications,
  forwardedRequests,
  type Message,
  malformedMessage,
  toBody,
  validMessage,
} from '../helpers/mcp-messages.ts';

const config = join(import.meta.dirname, '../../configs/typed-proxy.yaml');
const recorder = join(import.meta.dirname, '../fixtures/recording-mcp-child.mjs');
const dir = mkdtempSync(join(tmpdir(), 'mcp-validate-'));

let svc: StartedService;
let session: string;

beforeAll(async () => {
  svc = await startService(config, {
    warmupMs: 15000,
    env: { PROXY_AUDIT_PATH: join(dir, 'audit.db') },
    set: [
      `upstreams.everything.command=${process.execPath}`,
      `upstreams.everything.args=[${JSON.stringify(recorder)}]`,
    ],
  });
  const init = await post({
    jsonrpc: '2.0',
    id: 'init',
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'property', version: '1.0.0' } },
  });
  expect(init.status).toBe(200);
  session = init.res.headers.get('mcp-session-id') as string;
  expect(session).toBeTruthy();
});
afterAll(async () => {
  await svc?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function post(body: Message | string, headers: Record<string, string> = {}) {
  const res = await fetch(`${svc.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : toBody(body),
    // A message the server never answers would hold the client this long: fail, not hang.
    signal: AbortSignal.timeout(20_000),
  });
  const text = await res.text();
  return { res, status: res.status, body: text ? JSON.parse(text) : undefined };
}

const inSession = () => ({ 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' });

/** How many messages the session's server has received (its own `debug/received`, not counted). */
async function receivedCount(): Promise<number> {
  const { status, body } = await post({ jsonrpc: '2.0', id: 'look', method: 'debug/received' }, inSession());
  expect(status).toBe(200);
  return (body.result.received as unknown[]).length;
}

async function liveSessions(): Promise<number> {
  const health = await (await fetch(`${svc.url}/health`)).json();
  return health.sessions.live as number;
}

describe('typed proxy: malformed MCP messages never reach the server', () => {
  it('200 generated malformed messages: each answered 400 with the path, none received upstream', async () => {
    const before = await receivedCount();
    const sessions = await liveSessions();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(malformedMessage(), async (m) => {
        n++;
        const { status, body } = await post(m, inSession());
        expect(status).toBe(400);
        expect(body.jsonrpc).toBe('2.0');
        expect([-32600, -32602]).toContain(body.error.code);
        expect(body.error.data.path).toMatch(/^\$/);
      }),
      { seed: 29004, numRuns: 200 },
    );
    expect(n).toBe(200);
    expect(await receivedCount()).toBe(before);
    // A malformed initialize opens no session either.
    expect(await liveSessions()).toBe(sessions);
  }, 180_000);

  it('valid messages still reach the server, one each', async () => {
    await fc.assert(
      fc.asyncProperty(validMessage(forwardedRequests, forwardedNotifications), async (m) => {
        const before = await receivedCount();
        const { status } = await post(m, inSession());
        expect(status).toBe('id' in m ? 200 : 202);
        expect(await receivedCount()).toBe(before + 1);
      }),
      { seed: 29005, numRuns: 60 },
    );
  }, 180_000);

  it('a cancellation or progress notification that is well formed is accepted (202), not refused', async () => {
    await fc.assert(
      fc.asyncProperty(validMessage([], ['notifications/cancelled', 'notifications/progress']), async (m) => {
        expect((await post(m, inSession())).status).toBe(202);
      }),
      { seed: 29006, numRuns: 20 },
    );
  }, 60_000);
});

describe('typed proxy, 2026-07-28 era: malformed modern requests never reach the server', () => {
  const version = '2026-07-28';
  const meta = {
    'io.modelcontextprotocol/protocolVersion': version,
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  /** A message as a modern client sends it: the modern _meta added, the headers mirroring the body. */
  const modern = (m: Message): { body: Message; headers: Record<string, string> } => {
    const params = m.params;
    const isObject = (v: unknown): v is Record<string, unknown> =>
      v !== null && typeof v === 'object' && !Array.isArray(v);
    // The modern _meta merged into the message's own; a _meta the mutation broke is left broken.
    const own = isObject(params) ? params._meta : undefined;
    const body =
      isObject(params) && (own === undefined || isObject(own))
        ? { ...m, params: { ...params, _meta: { ...meta, ...(own ?? {}) } } }
        : m;
    const headers: Record<string, string> = { 'mcp-protocol-version': version };
    if (typeof m.method === 'string') headers['mcp-method'] = m.method;
    const p = params as Record<string, unknown> | undefined;
    const name = m.method === 'resources/read' ? p?.uri : p?.name;
    if (typeof name === 'string' && /^[\x21-\x7e]*$/.test(name)) headers['mcp-name'] = name;
    return { body, headers };
  };
  /** How many messages the held session's server has received (a method no version defines goes through). */
  async function heldReceived(): Promise<number> {
    const look = modern({ jsonrpc: '2.0', id: 'look', method: 'debug/received', params: {} });
    const { status, body } = await post(look.body, look.headers);
    expect(status, JSON.stringify(body)).toBe(200);
    return (body.result.received as unknown[]).length;
  }

  it('200 generated malformed messages in the modern era: each refused at once, none received upstream', async () => {
    const before = await heldReceived();
    const sessions = await liveSessions();
    await fc.assert(
      fc.asyncProperty(malformedMessage(), async (m) => {
        const { body: message, headers } = modern(m);
        const { status, body } = await post(message, headers);
        // 400 (malformed, a header not the body's), or 404 for a legacy method (initialize, ping…).
        expect([400, 404], JSON.stringify(body)).toContain(status);
        expect(body.jsonrpc).toBe('2.0');
        expect([-32600, -32602, -32020, -32601]).toContain(body.error.code);
      }),
      { seed: 30004, numRuns: 200 },
    );
    expect(await heldReceived()).toBe(before);
    // No session was opened for any of them (the held one existed before).
    expect(await liveSessions()).toBe(sessions);
  }, 180_000);
});
