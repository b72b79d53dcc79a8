/**
 * Issue 30, the reverse direction: a 2025-11-25 client (the official MCP TypeScript SDK v1) through
 * the typed proxy (configs/typed-proxy.yaml, started from its config on ephemeral ports) to an
 * upstream that speaks only 2026-07-28 over HTTP (test/helpers/mcp-2026-server.ts: stateless,
 * `initialize` refused -32022). The gateway finds out with server/discover, answers `initialize`
 * itself from it, holds the client's session and sends each request with the modern `_meta`
 * (plugins/proxy/era-2025-client.ts); everything the proxy enforces still applies (schema
 * validation of arguments); an `input_required` result reaches the client as an elicitation
 * request over its session; resources/subscribe maps onto subscriptions/listen; resource not found
 * comes back -32002; what cannot be mapped is a clear JSON-RPC error, never a hang.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  McpError,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { type ModernServer, modern, startModernOnlyServer, staticUri } from '../helpers/mcp-2026-server.ts';
import { until } from '../helpers/servers.ts';

const config = new URL('../../configs/typed-proxy.yaml', import.meta.url).pathname;
const meta = 'io.modelcontextprotocol/';

let upstream: ModernServer;
let svc: StartedService;

beforeAll(async () => {
  upstream = await startModernOnlyServer();
  svc = await startService(config, {
    warmupMs: 15000,
    set: [`upstreams.everything={kind: jsonrpc, url: "${upstream.url}", protocol: mcp}`],
  });
}, 60_000);
afterAll(async () => {
  await svc?.close();
  await upstream?.close();
});

async function connect(capabilities: Record<string, unknown> = {}) {
  const client = new Client({ name: 'sdk-v1', version: '1.0.0' }, { capabilities });
  const transport = new StreamableHTTPClientTransport(new URL(`${svc.url}/`));
  await client.connect(transport);
  return { client, transport };
}

interface RpcBody {
  id?: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

function field(value: unknown, key: string): unknown {
  return value !== null && typeof value === 'object' ? (value as Record<string, unknown>)[key] : undefined;
}

/** A raw JSON-RPC POST as a 2025 client sends it. */
async function post(body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${svc.url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-11-25',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(15_000),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text === '' ? undefined : (JSON.parse(text) as RpcBody),
  };
}

async function rawSession(): Promise<string> {
  const init = await post({
    jsonrpc: '2.0',
    id: 1,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1.0.0' } },
  });
  expect(init.status).toBe(200);
  expect(init.body?.result?.protocolVersion).toBe('2025-06-18');
  return init.headers.get('mcp-session-id') as string;
}

function sentUpstream(method: string) {
  return upstream.received.filter((r) => r.method === method);
}

describe('a 2025-11-25 client through the typed proxy to a 2026-07-28-only upstream', () => {
  it('initialize is answered by the gateway from server/discover; the upstream never sees initialize', async () => {
    const { client } = await connect();
    try {
      expect(client.getServerVersion()).toEqual({ name: 'modern-only-fixture', version: '1.2.3' });
      expect(client.getServerCapabilities()).toEqual({
        tools: { listChanged: true },
        prompts: {},
        resources: { subscribe: true, listChanged: true },
      });
      expect(client.getInstructions()).toBe('A 2026-07-28-only test server.');
      expect(sentUpstream('initialize')).toEqual([]);
      expect(sentUpstream('server/discover').length).toBeGreaterThanOrEqual(2); // the probe, then this initialize
    } finally {
      await client.close();
    }
  });

  it('tools/list and tools/call carry the modern _meta and headers; the answers lose resultType', async () => {
    const { client } = await connect({ roots: {} });
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toEqual([
        'echo',
        'get-sum',
        'trigger-long-running-operation',
        'trigger-elicitation-request',
        'trigger-sampling-request',
      ]);
      const result = await client.callTool({ name: 'echo', arguments: { message: 'from 2025' } });
      expect(result.content).toEqual([{ type: 'text', text: 'Echo: from 2025' }]);
      const call = sentUpstream('tools/call').at(-1);
      const m = field(call?.body.params, '_meta');
      expect(field(m, `${meta}protocolVersion`)).toBe(modern);
      expect(field(m, `${meta}clientCapabilities`)).toEqual({ roots: {} });
      expect(field(m, `${meta}clientInfo`)).toEqual({ name: 'sdk-v1', version: '1.0.0' });
      expect(call?.headers['mcp-protocol-version']).toBe(modern);
      expect(call?.headers['mcp-method']).toBe('tools/call');
      expect(call?.headers['mcp-name']).toBe('echo');
      expect(call?.headers['mcp-session-id']).toBeUndefined();
    } finally {
      await client.close();
    }
    const session = await rawSession();
    const listed = await post(
      { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
      { 'mcp-session-id': session },
    );
    expect(listed.status).toBe(200);
    expect(listed.body?.id).toBe(2);
    expect(listed.body?.result).not.toHaveProperty('resultType');
    expect(listed.body?.result).not.toHaveProperty('ttlMs');
    expect(listed.body?.result).not.toHaveProperty('cacheScope');
  });

  it('schema validation still applies: invalid arguments are refused and never reach the upstream', async () => {
    const { client } = await connect();
    try {
      const before = sentUpstream('tools/call').length;
      await expect(client.callTool({ name: 'get-sum', arguments: { a: 1, b: 'two' } })).rejects.toThrow(
        /422|Schema validation failed/,
      );
      expect(sentUpstream('tools/call').length).toBe(before);
      const sum = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } });
      expect(sum.content).toEqual([{ type: 'text', text: 'The sum of 1 and 2 is 3.' }]);
    } finally {
      await client.close();
    }
  });

  it('resources/read and prompts/get; a resource not found is -32002 again', async () => {
    const { client } = await connect();
    try {
      const read = await client.readResource({ uri: staticUri });
      expect(read.contents).toEqual([{ uri: staticUri, mimeType: 'text/markdown', text: '# Architecture' }]);
      const missing = await client.readResource({ uri: 'demo://resource/static/document/missing.md' }).catch((e) => e);
      expect(missing).toBeInstanceOf(McpError);
      expect((missing as McpError).code).toBe(-32002);
      expect(sentUpstream('resources/read').at(-1)?.headers['mcp-name']).toBe(
        'demo://resource/static/document/missing.md',
      );
      const prompt = await client.getPrompt({ name: 'simple-prompt' });
      expect(prompt.messages).toEqual([
        { role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } },
      ]);
    } finally {
      await client.close();
    }
  });

  it('an input_required round reaches the client as an elicitation request over its session', async () => {
    const { client } = await connect({ elicitation: { form: {} } });
    const asked: unknown[] = [];
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params);
      return { action: 'accept', content: { name: 'Ada' } };
    });
    try {
      const result = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
      expect(result.content).toEqual([
        { type: 'text', text: 'Elicitation answered: {"action":"accept","content":{"name":"Ada"}}' },
      ]);
      expect(asked).toEqual([
        {
          mode: 'form',
          message: 'What is your name?',
          requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
        },
      ]);
      // The retry upstream: the client's answer as inputResponses, with the server's requestState.
      const retry = sentUpstream('tools/call').at(-1)?.body.params as Record<string, unknown>;
      expect(retry.requestState).toBe('elicit-round-1');
      expect(retry.inputResponses).toEqual({ name: { action: 'accept', content: { name: 'Ada' } } });
    } finally {
      await client.close();
    }
  });

  it('a sampling round: the server’s createMessage answered by the client, the answer sent back upstream', async () => {
    const { client } = await connect({ sampling: {} });
    const asked: unknown[] = [];
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      asked.push(request.params);
      return { role: 'assistant', content: { type: 'text', text: 'sampled by the client' }, model: 'test-model' };
    });
    try {
      const result = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello' } });
      expect(JSON.stringify(result.content)).toContain('sampled by the client');
      expect(asked).toEqual([
        {
          messages: [{ role: 'user', content: { type: 'text', text: 'context: hello' } }],
          systemPrompt: 'You are a helpful test server.',
          maxTokens: 100,
        },
      ]);
      const retry = sentUpstream('tools/call').at(-1)?.body.params as Record<string, unknown>;
      expect(retry.requestState).toBe('sample-round-1');
      expect(retry.inputResponses).toEqual({
        sample: { role: 'assistant', content: { type: 'text', text: 'sampled by the client' }, model: 'test-model' },
      });
    } finally {
      await client.close();
    }
  });

  it('cancellation: the client’s notifications/cancelled closes the upstream request, the session serves on', async () => {
    const { client } = await connect();
    try {
      const before = upstream.cancelled();
      const abort = new AbortController();
      let progressed = 0;
      const call = client
        .callTool({ name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } }, undefined, {
          signal: abort.signal,
          onprogress: () => {
            progressed++;
          },
        })
        .catch((e: unknown) => e);
      // Cancelled once the call is running upstream (its first progress seen).
      await until(() => progressed > 0, 15_000);
      abort.abort('changed my mind');
      expect(await call).toBeInstanceOf(Error);
      await until(() => upstream.cancelled() === before + 1, 15_000);
      const echo = await client.callTool({ name: 'echo', arguments: { message: 'after cancel' } });
      expect(echo.content).toEqual([{ type: 'text', text: 'Echo: after cancel' }]);
    } finally {
      await client.close();
    }
  });

  it('the gateway’s own calls (the typed send route) reach the 2026-only upstream statelessly', async () => {
    const before = sentUpstream('initialize').length;
    const res = await fetch(`${svc.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'tools/call', tool: 'get-sum', arguments: { a: 2, b: 3 } }),
      signal: AbortSignal.timeout(15_000),
    });
    const body = (await res.json()) as { content?: Array<{ text?: string }>; metadata?: Record<string, unknown> };
    expect(res.status).toBe(200);
    expect(body.content?.[0]?.text).toBe('The sum of 2 and 3 is 5.');
    expect(body.metadata).toMatchObject({ stype: 'everything.get-sum', schema_valid: true });
    const call = sentUpstream('tools/call').at(-1);
    const m = field(call?.body.params, '_meta');
    expect(field(m, `${meta}protocolVersion`)).toBe(modern);
    expect(field(m, `${meta}clientInfo`)).toMatchObject({ name: 'switchyard' });
    expect(call?.headers['mcp-method']).toBe('tools/call');
    expect(call?.headers['mcp-name']).toBe('get-sum');
    // Initialize was tried at most once (refused -32022), then every call stateless.
    expect(sentUpstream('initialize').length - before).toBeLessThanOrEqual(1);
    // A multi-round tool cannot be answered on the gateway's own call: a clear error, no hang.
    const rounds = await fetch(`${svc.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'tools/call', tool: 'trigger-elicitation-request', arguments: {} }),
      signal: AbortSignal.timeout(15_000),
    });
    expect(rounds.status).toBe(502);
    expect(JSON.stringify(await rounds.json())).toMatch(/input_required|capability/);
  });

  it('progress: the upstream’s notifications/progress reach the client before the result', async () => {
    const { client } = await connect();
    try {
      const seen: Array<{ progress: number; total?: number }> = [];
      const result = await client.callTool(
        { name: 'trigger-long-running-operation', arguments: { duration: 0.2, steps: 4 } },
        undefined,
        { onprogress: (p) => seen.push({ progress: p.progress, total: p.total }) },
      );
      expect(result.content).toEqual([
        { type: 'text', text: 'Long running operation completed. Duration: 0.2 seconds, Steps: 4.' },
      ]);
      expect(seen).toEqual([1, 2, 3, 4].map((progress) => ({ progress, total: 4 })));
    } finally {
      await client.close();
    }
  });

  it('a client that answers the elicitation with an error ends the call with a clear error', async () => {
    const { client } = await connect({ elicitation: {} });
    client.setRequestHandler(ElicitRequestSchema, async () => {
      throw new McpError(-32600, 'the user closed the dialog');
    });
    try {
      const err = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }).catch((e) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32603);
      expect((err as McpError).message).toMatch(/client refused the server's request: .*the user closed the dialog/);
    } finally {
      await client.close();
    }
  });

  it('without the elicitation capability the multi-round tool is a clear error, not a hang', async () => {
    const { client } = await connect();
    try {
      const err = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }).catch((e) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32603);
      expect((err as McpError).message).toMatch(/2026-07-28 only.*capability/i);
      expect((err as McpError).data).toMatchObject({ upstreamCode: -32021, requiredCapabilities: { elicitation: {} } });
    } finally {
      await client.close();
    }
  });

  it('resources/subscribe maps onto subscriptions/listen: updates on the GET stream, ended with the session', async () => {
    const { client, transport } = await connect();
    const updates: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updates.push(n.params.uri);
    });
    const opened = upstream.listensOpened();
    await client.subscribeResource({ uri: staticUri });
    await until(() => updates.length >= 2);
    expect(new Set(updates)).toEqual(new Set([staticUri]));
    expect(upstream.listensOpened()).toBeGreaterThan(opened);
    const listen = upstream.received.filter((r) => r.method === 'subscriptions/listen').at(-1)?.body.params;
    expect(field(field(listen, 'notifications'), 'resourceSubscriptions')).toEqual([staticUri]);
    // A URI the server does not acknowledge: refused, the others kept.
    const refused = await client.subscribeResource({ uri: 'demo://resource/static/document/none.md' }).catch((e) => e);
    expect(refused).toBeInstanceOf(McpError);
    expect((refused as McpError).code).toBe(-32602);
    await client.unsubscribeResource({ uri: staticUri });
    // The session's end closes what it held upstream.
    await transport.terminateSession();
    await client.close();
    await until(() => upstream.listening() === 0);
  });

  it('malformed and unmappable requests: clear errors', async () => {
    const session = await rawSession();
    const unknown = await post(
      { jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} },
      { 'mcp-session-id': 'nope' },
    );
    expect(unknown.status).toBe(404);
    const notJson = await post('{"jsonrpc":', { 'mcp-session-id': session });
    expect(notJson.body?.error?.code).toBe(-32700);
    const noName = await post(
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { arguments: {} } },
      { 'mcp-session-id': session },
    );
    expect(noName.body?.error?.code).toBe(-32602);
    const level = await post(
      { jsonrpc: '2.0', id: 5, method: 'logging/setLevel', params: { level: 'info' } },
      { 'mcp-session-id': session },
    );
    expect(level.body?.error).toMatchObject({ code: -32601 });
    // A response to nothing the gateway asked: accepted, dropped.
    const stray = await post({ jsonrpc: '2.0', id: 'switchyard-input-999', result: {} }, { 'mcp-session-id': session });
    expect(stray.status).toBe(202);
    const ping = await post({ jsonrpc: '2.0', id: 6, method: 'ping' }, { 'mcp-session-id': session });
    expect(ping.body).toEqual({ jsonrpc: '2.0', id: 6, result: {} });
    const unknownMethod = await post(
      {
        jsonrpc: '2.0',
        id: 7,
        method: 'completion/complete',
        params: { ref: { type: 'ref/prompt', name: 'simple-prompt' }, argument: { name: 'a', value: 'b' } },
      },
      { 'mcp-session-id': session },
    );
    expect(unknownMethod.body?.error?.code).toBe(-32601);
    // GET and DELETE need the session id.
    const getNone = await fetch(`${svc.url}/`, {
      headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    });
    expect(getNone.status).toBe(400);
    await getNone.body?.cancel();
    const deleteNone = await fetch(`${svc.url}/`, {
      method: 'DELETE',
      headers: { 'mcp-protocol-version': '2025-11-25' },
    });
    expect(deleteNone.status).toBe(400);
    // DELETE ends the session; its id is unknown afterwards.
    const del = await fetch(`${svc.url}/`, { method: 'DELETE', headers: { 'mcp-session-id': session } });
    expect(del.status).toBe(204);
    const after = await post({ jsonrpc: '2.0', id: 8, method: 'ping' }, { 'mcp-session-id': session });
    expect(after.status).toBe(404);
  });
});

describe('both eras on the route in front of the 2026-07-28-only upstream', () => {
  it('a 2026-07-28 request is forwarded as it came (resultType and cache hints kept)', async () => {
    const res = await post(
      {
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/list',
        params: {
          _meta: {
            [`${meta}protocolVersion`]: modern,
            [`${meta}clientCapabilities`]: {},
            [`${meta}clientInfo`]: { name: 'raw-2026', version: '1.0.0' },
          },
        },
      },
      { 'mcp-protocol-version': modern, 'mcp-method': 'tools/list' },
    );
    expect(res.status).toBe(200);
    expect(res.body?.result).toMatchObject({ resultType: 'complete', ttlMs: 60000, cacheScope: 'public' });
    expect(field(sentUpstream('tools/list').at(-1)?.body.params, '_meta')).toMatchObject({
      [`${meta}clientInfo`]: { name: 'raw-2026', version: '1.0.0' },
    });
  });
});

describe('upstream_era: modern, configured; an upstream that does not check capabilities', () => {
  let configured: ModernServer;
  let service: StartedService;
  beforeAll(async () => {
    configured = await startModernOnlyServer({ checkCapabilities: false });
    service = await startService(config, {
      warmupMs: 15000,
      set: [
        `upstreams.everything={kind: jsonrpc, url: "${configured.url}", protocol: mcp}`,
        // The JSON-RPC route's proxy stage (configs/typed-proxy.yaml).
        'routes.2.pipeline.9.proxy.upstream_era=modern',
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await service?.close();
    await configured?.close();
  });

  it('no probe: the only server/discover is the one initialize is answered from', async () => {
    const client = new Client({ name: 'sdk-v1', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/`)));
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
      expect(configured.received.filter((r) => r.method === 'server/discover')).toHaveLength(1);
      expect(configured.received.filter((r) => r.method === 'initialize')).toHaveLength(0);
    } finally {
      await client.close();
    }
  });

  it('input the client did not declare a capability for: a clear error from the gateway, no stream, no retry', async () => {
    const client = new Client({ name: 'sdk-v1', version: '1.0.0' }, { capabilities: { sampling: {} } });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${service.url}/`)));
    try {
      const calls = () => configured.received.filter((r) => r.method === 'tools/call').length;
      const before = calls();
      const err = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }).catch((e) => e);
      expect(err).toBeInstanceOf(McpError);
      expect((err as McpError).code).toBe(-32603);
      expect((err as McpError).message).toMatch(/did not declare: elicitation/);
      expect((err as McpError).data).toMatchObject({ requiredCapabilities: { elicitation: {} } });
      expect(calls()).toBe(before + 1);
    } finally {
      await client.close();
    }
  });

  it('one client holds at most 64 sessions: opening more ends its own oldest', async () => {
    const send = (body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${service.url}/`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-11-25',
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const open = async () => {
      const res = await send({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'loop', version: '1' } },
      });
      await res.arrayBuffer();
      return res.headers.get('mcp-session-id') as string;
    };
    const first = await open();
    let last = first;
    for (let i = 0; i < 64; i++) last = await open();
    const ping = async (session: string) => {
      const res = await send({ jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-session-id': session });
      await res.arrayBuffer();
      return res.status;
    };
    expect(await ping(first)).toBe(404);
    expect(await ping(last)).toBe(200);
  });
});
