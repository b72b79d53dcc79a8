/**
 * Issue 30: a 2026-07-28 client through the typed proxy to the shipped stdio 2025 reference server
 * (configs/typed-proxy.yaml), for what a stateless client cannot get from a session of its own:
 *
 * - progress: the server's notifications/progress for the request, streamed to the client before
 *   the result (an event stream answer, the client's progressToken put back);
 * - cancellation: the official SDK v2 client aborting its call ends the upstream call, and the
 *   held session serves on;
 * - input_required rounds: a server request (elicitation, sampling) made while serving a call
 *   comes to the client as an `input_required` result; the client's retry with inputResponses and
 *   the requestState answers it and the call completes (the SDK v2 client drives the rounds);
 * - subscriptions/listen: an event stream of the held session's notifications the client opted in
 *   to, led by the acknowledgement; resource updates of the URIs it names (resources/subscribe
 *   upstream), each tagged with the subscription id;
 * - what the client's `_meta` capabilities lack is -32021 with the required capabilities, a
 *   requestState that is unknown or another client's -32602: a clear error, never a hang.
 */

import type { ChildProcess } from 'node:child_process';
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { freePort, startEverythingHttp, stop } from '../helpers/servers.ts';

const config = new URL('../../configs/typed-proxy.yaml', import.meta.url).pathname;
const modern = '2026-07-28';

function metaWith(capabilities: Record<string, unknown>): Record<string, unknown> {
  return {
    'io.modelcontextprotocol/protocolVersion': modern,
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1.0.0' },
  };
}

interface Body {
  id?: unknown;
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: Record<string, unknown> };
}

/** A modern tools/call as a conforming client sends it (JSON answer asked for). */
async function call(
  url: string,
  params: Record<string, unknown>,
  capabilities: Record<string, unknown>,
  fetcher: typeof fetch = fetch,
  extra: Record<string, string> = {},
): Promise<{ status: number; body: Body }> {
  const res = await fetcher(`${url}/`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': modern,
      'mcp-method': 'tools/call',
      'mcp-name': String(params.name),
      ...extra,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 5,
      method: 'tools/call',
      params: { ...params, _meta: metaWith(capabilities) },
    }),
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, body: (await res.json()) as Body };
}

const agents: Agent[] = [];
function fetchFrom(address: string): typeof fetch {
  const dispatcher = new Agent({ localAddress: address });
  agents.push(dispatcher);
  return ((url: string | URL, init?: RequestInit) =>
    undiciFetch(url, { ...(init as object), dispatcher } as never)) as unknown as typeof fetch;
}

function modernClient(url: string, capabilities: Record<string, unknown> = {}) {
  const client = new ModernClient(
    { name: 'sdk-v2', version: '1.0.0' },
    { capabilities, versionNegotiation: { mode: { pin: modern } } },
  );
  return { client, transport: new ModernTransport(new URL(`${url}/`)) };
}

// One mapping over both transports (era-2026.ts): the reference server over stdio and over streamable HTTP.
describe.each(['stdio', 'http'] as const)(
  'a 2026-07-28 client through the proxy to the %s 2025 server: progress, cancellation, input rounds',
  (transport) => {
    let svc: StartedService;
    let server: ChildProcess | undefined;

    beforeAll(async () => {
      if (transport === 'stdio') svc = await startService(config, { warmupMs: 15000 });
      else {
        const port = await freePort();
        server = await startEverythingHttp(port);
        svc = await startService(config, {
          warmupMs: 15000,
          set: [`upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:${port}/mcp", protocol: mcp}`],
        });
      }
    }, 60_000);
    afterAll(async () => {
      await svc?.close();
      if (server) await stop(server);
      await Promise.all(agents.splice(0).map((a) => a.close()));
    });

    it('progress: the SDK v2 client gets every notifications/progress of its call, then the result', async () => {
      const { client, transport } = modernClient(svc.url);
      await client.connect(transport);
      try {
        const seen: Array<{ progress: number; total?: number }> = [];
        const result = await client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 0.4, steps: 4 } },
          { onprogress: (p) => seen.push({ progress: p.progress, total: p.total }) },
        );
        expect(result.content).toEqual([
          { type: 'text', text: 'Long running operation completed. Duration: 0.4 seconds, Steps: 4.' },
        ]);
        expect(seen).toEqual([1, 2, 3, 4].map((progress) => ({ progress, total: 4 })));
        // Without a progressToken the answer is one JSON object (no progress asked for).
        const plain = await call(
          svc.url,
          { name: 'trigger-long-running-operation', arguments: { duration: 0.1, steps: 2 } },
          {},
        );
        expect(plain.body.result).toMatchObject({ resultType: 'complete' });
      } finally {
        await client.close();
      }
    });

    it('cancellation: the SDK v2 client aborting its call ends it; the held session serves on', async () => {
      const { client, transport } = modernClient(svc.url);
      await client.connect(transport);
      try {
        const abort = new AbortController();
        let progressed = 0;
        const pending = client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 30, steps: 30 } },
          {
            signal: abort.signal,
            onprogress: () => {
              progressed++;
              abort.abort();
            },
          },
        );
        await expect(pending).rejects.toThrow();
        expect(progressed).toBeGreaterThanOrEqual(1);
        const after = await client.callTool({ name: 'echo', arguments: { message: 'after' } });
        expect(after.content).toEqual([{ type: 'text', text: 'Echo: after' }]);
      } finally {
        await client.close();
      }
    });

    it('elicitation: an input_required round the SDK v2 client answers; the tool gets the answer', async () => {
      const { client, transport } = modernClient(svc.url, { elicitation: { form: {} } });
      const asked: unknown[] = [];
      client.setRequestHandler('elicitation/create', async (request) => {
        asked.push(request.params);
        return { action: 'accept', content: { name: 'Ada', check: true } };
      });
      await client.connect(transport);
      try {
        const result = await client.callTool({ name: 'trigger-elicitation-request', arguments: {} });
        expect(asked).toHaveLength(1);
        expect(asked[0]).toMatchObject({ message: expect.stringContaining('Please provide inputs') });
        expect(JSON.stringify(result.content)).toContain('Ada');
      } finally {
        await client.close();
      }
    });

    it('sampling: the server’s createMessage answered by the client in a round', async () => {
      const { client, transport } = modernClient(svc.url, { sampling: {} });
      client.setRequestHandler('sampling/createMessage', async () => ({
        role: 'assistant',
        content: { type: 'text', text: 'sampled by the client' },
        model: 'test-model',
      }));
      await client.connect(transport);
      try {
        const result = await client.callTool({ name: 'trigger-sampling-request', arguments: { prompt: 'hello' } });
        expect(JSON.stringify(result.content)).toContain('sampled by the client');
      } finally {
        await client.close();
      }
    });

    it('the rounds on the wire: input_required with the server request, the retry with inputResponses completes it', async () => {
      const caps = { elicitation: {} };
      const first = await call(svc.url, { name: 'trigger-elicitation-request', arguments: {} }, caps);
      expect(first.status).toBe(200);
      const result = first.body.result as {
        resultType: string;
        inputRequests: Record<string, unknown>;
        requestState: string;
      };
      expect(result.resultType).toBe('input_required');
      const [key, request] = Object.entries(result.inputRequests)[0] as [string, Record<string, unknown>];
      expect(request).toMatchObject({ method: 'elicitation/create', params: { requestedSchema: { type: 'object' } } });
      // Another client (another address) cannot take the round over.
      const stolen = await call(
        svc.url,
        {
          name: 'trigger-elicitation-request',
          arguments: {},
          requestState: result.requestState,
          inputResponses: { [key]: { action: 'decline' } },
        },
        caps,
        fetchFrom('127.0.0.4'),
      );
      expect(stolen.body.error).toMatchObject({ code: -32602 });
      const retry = await call(
        svc.url,
        {
          name: 'trigger-elicitation-request',
          arguments: {},
          requestState: result.requestState,
          inputResponses: { [key]: { action: 'decline' } },
        },
        caps,
      );
      expect(retry.body.result).toMatchObject({ resultType: 'complete' });
      expect(JSON.stringify(retry.body.result)).toMatch(/decline/i);
      // The round is used up: the same requestState again is -32602 at once.
      const again = await call(
        svc.url,
        { name: 'trigger-elicitation-request', arguments: {}, requestState: result.requestState, inputResponses: {} },
        caps,
      );
      expect(again.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('requestState') });
    });

    it('a server request the client’s _meta capabilities lack is -32021 with the required capabilities', async () => {
      const res = await call(svc.url, { name: 'trigger-elicitation-request', arguments: {} }, {});
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { elicitation: {} } } });
      const sampling = await call(
        svc.url,
        { name: 'trigger-sampling-request', arguments: { prompt: 'x' } },
        { elicitation: {} },
      );
      expect(sampling.body.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { sampling: {} } } });
      // The session serves on.
      const echo = await call(svc.url, { name: 'echo', arguments: { message: 'still here' } }, {});
      expect(echo.body.result).toMatchObject({ content: [{ type: 'text', text: 'Echo: still here' }] });
    });

    it('Mcp-Param-* headers the listed tool does not declare are -32020 (checked against the body like Mcp-Name)', async () => {
      const listed = await fetch(`${svc.url}/`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': modern,
          'mcp-method': 'tools/list',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: metaWith({}) } }),
      });
      expect(listed.status).toBe(200);
      const echo = { name: 'echo', arguments: { message: 'hi' } };
      const routed = await call(svc.url, echo, {}, fetch, { 'mcp-param-region': 'eu-west' });
      expect(routed.status).toBe(400);
      expect(routed.body.error).toMatchObject({ code: -32020, data: { header: 'Mcp-Param-region' } });
      expect((await call(svc.url, echo, {})).body.result).toMatchObject({ resultType: 'complete' });
    });

    it('subscriptions/listen: acknowledged first, then the updates of the resources named, tagged with the subscription id', async () => {
      const abort = new AbortController();
      const uri = 'demo://resource/static/document/architecture.md';
      const res = await fetch(`${svc.url}/`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': modern,
          'mcp-method': 'subscriptions/listen',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 'listen-1',
          method: 'subscriptions/listen',
          params: { notifications: { toolsListChanged: true, resourceSubscriptions: [uri] }, _meta: metaWith({}) },
        }),
        signal: abort.signal,
      });
      if (transport === 'http') {
        // Not mapped over HTTP (the server's GET stream is not read): a clear error at once.
        expect(res.status).toBe(404);
        expect(((await res.json()) as Body).error).toMatchObject({ code: -32601 });
        return;
      }
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const events = eventsOf(res.body as ReadableStream<Uint8Array>);
      const ack = (await events.next()).value;
      expect(ack).toMatchObject({
        method: 'notifications/subscriptions/acknowledged',
        params: {
          notifications: { toolsListChanged: true, resourceSubscriptions: [uri] },
          _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' },
        },
      });
      // The server's simulated updates of subscribed resources, started by a tool of its own.
      const toggled = await call(svc.url, { name: 'toggle-subscriber-updates', arguments: {} }, {});
      expect(toggled.body.result).toMatchObject({ resultType: 'complete' });
      const update = (await events.next()).value;
      expect(update).toMatchObject({
        method: 'notifications/resources/updated',
        params: { uri, _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } },
      });
      abort.abort();
      await call(svc.url, { name: 'toggle-subscriber-updates', arguments: {} }, {});
    });
  },
);

/** The JSON messages of an event stream, as they come. */
async function* eventsOf(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf('\n\n');
    while (end !== -1) {
      const data = buffer
        .slice(0, end)
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trim())
        .join('\n');
      buffer = buffer.slice(end + 2);
      if (data) yield JSON.parse(data);
      end = buffer.indexOf('\n\n');
    }
  }
}
