/**
 * Trace context reaches an MCP server over stdio (no headers there): a traced call carries
 * `params._meta.traceparent` naming the gateway's client span (SEP-414, the OpenTelemetry MCP
 * conventions), keeps the rest of `_meta`, leaves the caller's message unchanged, and touches
 * neither an untraced call nor a plain JSON-RPC upstream's params.
 */
import { join } from 'node:path';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { newRequestTrace } from '../../runtime/observability/request-trace.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { RpcUpstream } from '../../runtime/upstreams/types.ts';

const child = join(import.meta.dirname, '../fixtures/recording-mcp-child.mjs');
const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
const tracer = provider.getTracer('test');

interface Received {
  id?: unknown;
  method: string;
  params?: Record<string, unknown>;
}

const upstreams: RpcUpstream[] = [];
async function start(protocol: 'mcp' | 'jsonrpc'): Promise<RpcUpstream> {
  const up = createUpstream(
    `rec-${protocol}`,
    { kind: 'stdio', command: process.execPath, args: [child], protocol, sessions: 'shared' },
    { logger: silentLogger, configDir: process.cwd() },
  ) as RpcUpstream;
  upstreams.push(up);
  await up.ready(10000);
  return up;
}
afterAll(async () => {
  await Promise.all(upstreams.map((u) => u.close()));
  await provider.shutdown();
});

async function lastReceived(up: RpcUpstream, method: string): Promise<Received> {
  const answer = await up.call({ jsonrpc: '2.0', id: 'look', method: 'debug/received' });
  const all = (answer!.result as { received: Received[] }).received;
  return all.filter((m) => m.method === method).at(-1)!;
}

function tracedRequest() {
  const server = tracer.startSpan('server');
  return { trace: { ...newRequestTrace(), tracer, span: server }, server };
}

describe('trace context in params._meta', () => {
  it('an MCP upstream over stdio gets the client span as traceparent in _meta, the rest of _meta kept', async () => {
    const up = await start('mcp');
    const { trace, server } = tracedRequest();
    const message = {
      jsonrpc: '2.0' as const,
      id: 7,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'hi' }, _meta: { progressToken: 'p1', traceparent: 'forged' } },
    };
    const before = structuredClone(message);
    await up.call(message, { trace });
    server.end();
    expect(message, 'the caller’s message is not changed').toEqual(before);
    const got = await lastReceived(up, 'tools/call');
    const client = exporter.getFinishedSpans().find((s) => s.name === 'tools/call rec-mcp')!;
    const { traceId, spanId } = client.spanContext();
    expect(got.params).toMatchObject({
      name: 'echo',
      arguments: { message: 'hi' },
      _meta: { progressToken: 'p1', traceparent: `00-${traceId}-${spanId}-01` },
    });
    expect(traceId).toBe(server.spanContext().traceId);

    // A request without params gets them, with only _meta.
    await up.call({ jsonrpc: '2.0', id: 8, method: 'ping' }, { trace });
    expect((await lastReceived(up, 'ping')).params).toEqual({ _meta: { traceparent: expect.stringMatching(/^00-/) } });

    // Untraced: sent as it came.
    await up.call({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} });
    expect((await lastReceived(up, 'tools/list')).params).toEqual({});
  });

  it('a plain JSON-RPC upstream keeps its params as they are (no _meta is invented there)', async () => {
    const up = await start('jsonrpc');
    const { trace, server } = tracedRequest();
    await up.call({ jsonrpc: '2.0', id: 1, method: 'sum', params: { a: 1 } }, { trace });
    await up.call({ jsonrpc: '2.0', id: 2, method: 'sum2', params: [1, 2] }, { trace });
    server.end();
    expect((await lastReceived(up, 'sum')).params).toEqual({ a: 1 });
    expect((await lastReceived(up, 'sum2')).params).toEqual([1, 2]);
  });
});
