/**
 * Benchmark upstream: a minimal JSON-RPC 2.0 server over HTTP (node:http, keep-alive) that
 * answers like the MCP reference server for the few methods a benchmark needs, with no
 * session, no SSE and no validation, so its own cost stays small and constant.
 *
 * Listens on 127.0.0.1:$PORT (0 = ephemeral; the chosen port is printed as `listening <port>`).
 * BENCH_SERVICE_MS > 0 makes it a backend with one worker: answers go out one at a time, each
 * after that many ms (a capacity for bench/upstreams/typed-proxy-endpoints.ts to scale out).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { serveForBench } from './serve.ts';

// The reference server's echo tool definition, so a tools/list through a pinning proxy matches.
const echoTool = {
  name: 'echo',
  title: 'Echo Tool',
  description: 'Echoes back the input string',
  inputSchema: {
    type: 'object',
    properties: { message: { type: 'string', description: 'Message to echo' } },
    required: ['message'],
    additionalProperties: false,
    $schema: 'http://json-schema.org/draft-07/schema#',
  },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
};

type Message = { id?: unknown; method?: unknown; params?: { name?: unknown; arguments?: { message?: unknown } } };

function answer(msg: Message): Record<string, unknown> | undefined {
  if (msg.id === undefined) return undefined; // notification
  const reply = (result: unknown) => ({ jsonrpc: '2.0', id: msg.id, result });
  switch (msg.method) {
    case 'initialize':
      return reply({
        protocolVersion: '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'bench-upstream', version: '0.0.0' },
      });
    case 'tools/list':
      return reply({ tools: [echoTool] });
    case 'tools/call':
      if (msg.params?.name === 'echo') {
        return reply({ content: [{ type: 'text', text: `Echo: ${String(msg.params.arguments?.message ?? '')}` }] });
      }
      return { jsonrpc: '2.0', id: msg.id, error: { code: -32602, message: `Unknown tool: ${msg.params?.name}` } };
    case 'ping':
      return reply({});
    default:
      return { jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } };
  }
}

function send(res: ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status, { 'content-length': '0' }).end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

function handle(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'POST') {
    send(res, req.method === 'GET' ? 200 : 405, req.method === 'GET' ? { ok: true } : undefined);
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    let msg: unknown;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      send(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      return;
    }
    if (Array.isArray(msg)) {
      const out = msg.map((m) => answer(m as Message)).filter((m) => m !== undefined);
      send(res, out.length ? 200 : 202, out.length ? out : undefined);
      return;
    }
    const out = msg !== null && typeof msg === 'object' ? answer(msg as Message) : undefined;
    if (serviceMs > 0) serveInTurn(() => send(res, out ? 200 : 202, out));
    else send(res, out ? 200 : 202, out);
  });
}

const serviceMs = Number(process.env.BENCH_SERVICE_MS ?? 0);
/** When the one worker is free again (ms, performance.now()). */
let freeAt = 0;

function serveInTurn(reply: () => void): void {
  const now = performance.now();
  freeAt = Math.max(freeAt, now) + serviceMs;
  setTimeout(reply, freeAt - now);
}

serveForBench(createServer({ keepAlive: true }, handle));
