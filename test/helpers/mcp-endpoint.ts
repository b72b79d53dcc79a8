/**
 * A stateful MCP streamable-HTTP server in this process (the official SDK's McpServer and
 * StreamableHTTPServerTransport, one per session, at /mcp), as one endpoint of a balanced
 * upstream: its `whoami` tool answers the endpoint's name, so a test sees where a session lives.
 * Unknown session ids answer 404 (the transport's "initialize again"), as the spec says.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { closeNow, listenLocal } from './servers.ts';

export interface McpEndpoint {
  name: string;
  /** The MCP endpoint's URL (…/mcp). */
  url: string;
  /** Live session ids (clients' and the health check's own). */
  sessions: Map<string, StreamableHTTPServerTransport>;
  /** Requests received (any method). */
  hits: number;
  close(): void;
}

export async function mcpEndpoint(name: string, port = 0): Promise<McpEndpoint> {
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    e.hits++;
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined;
    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const t = sessions.get(sid);
      if (!t) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
        return;
      }
      await t.handleRequest(req, res, body);
      return;
    }
    if (req.method !== 'POST' || !isInitializeRequest(body)) {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'No valid session ID' } }));
      return;
    }
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
      },
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    const server = new McpServer({ name: `fixture-${name}`, version: '1.0.0' });
    server.registerTool('whoami', { description: 'The name of the endpoint holding this session' }, async () => ({
      content: [{ type: 'text', text: name }],
    }));
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  };
  const http: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  const base = await listenLocal(http, port);
  const e: McpEndpoint = {
    name,
    url: `${base}/mcp`,
    sessions,
    hits: 0,
    close: () => closeNow(http),
  };
  return e;
}
