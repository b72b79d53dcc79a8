/**
 * A small MCP server that speaks only the 2026-07-28 revision over streamable HTTP, statelessly
 * (no `initialize`, no `Mcp-Session-Id`): every request names its version and the client's
 * capabilities in `params._meta`, mirrors the version, method and name in the `MCP-Protocol-Version`,
 * `Mcp-Method` and `Mcp-Name` headers (-32020 when they differ), and anything else — `initialize`
 * included, which carries no `_meta` version — is refused 400 with -32022 and the supported list,
 * as the revision's versioning page says. Results carry `resultType` (and `ttlMs`/`cacheScope`
 * where cacheable); a resource not found is -32602; method not found is HTTP 404.
 *
 * What it offers: the tools `echo`, `get-sum`, `trigger-long-running-operation`,
 * `trigger-elicitation-request` and `trigger-sampling-request` with the reference server's
 * definitions (so the typed proxy's registry pins and schemas apply), the last two multi-round
 * requests (an `input_required` result asking for an elicitation or a sampling, -32021 without the
 * capability); one static resource; `simple-prompt`; `subscriptions/listen` (acknowledged, then a
 * `notifications/resources/updated` of each subscribed URI every `updateEveryMs`). It records what
 * it was sent, for the tests to see what the gateway put on the wire.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export const modern = '2026-07-28';
const meta = 'io.modelcontextprotocol/';
const serverInfo = { name: 'modern-only-fixture', version: '1.2.3' };
export const staticUri = 'demo://resource/static/document/architecture.md';

const tools = [
  {
    name: 'echo',
    title: 'Echo Tool',
    description: 'Echoes back the input string',
    inputSchema: {
      type: 'object',
      properties: { message: { type: 'string', description: 'Message to echo' } },
      required: ['message'],
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
  },
  {
    name: 'get-sum',
    title: 'Get Sum Tool',
    description: 'Returns the sum of two numbers',
    inputSchema: {
      type: 'object',
      properties: {
        a: { type: 'number', description: 'First number' },
        b: { type: 'number', description: 'Second number' },
      },
      required: ['a', 'b'],
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
  },
  {
    name: 'trigger-long-running-operation',
    title: 'Trigger Long Running Operation Tool',
    description: 'Demonstrates a long running operation with progress updates.',
    inputSchema: {
      type: 'object',
      properties: {
        duration: { default: 10, description: 'Duration of the operation in seconds', type: 'number' },
        steps: { default: 5, description: 'Number of steps in the operation', type: 'number' },
      },
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
  },
  {
    name: 'trigger-elicitation-request',
    title: 'Trigger Elicitation Request Tool',
    description: 'Trigger a Request from the Server for User Elicitation',
    inputSchema: { type: 'object', properties: {}, $schema: 'http://json-schema.org/draft-07/schema#' },
  },
  {
    name: 'trigger-sampling-request',
    title: 'Trigger Sampling Request Tool',
    description: 'Trigger a Request from the Server for LLM Sampling',
    inputSchema: {
      type: 'object',
      properties: {
        prompt: { type: 'string', description: 'The prompt to send to the LLM' },
        maxTokens: { default: 100, description: 'Maximum number of tokens to generate', type: 'number' },
      },
      required: ['prompt'],
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
  },
];

export interface Received {
  method?: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
}

export interface ModernServer {
  /** The MCP endpoint, e.g. http://127.0.0.1:PORT/mcp */
  url: string;
  /** Every JSON-RPC message received, in order. */
  received: Received[];
  /** subscriptions/listen streams open now, and opened in all. */
  listening: () => number;
  listensOpened: () => number;
  /** Long-running tool calls whose request was closed before they finished (cancellation over HTTP). */
  cancelled: () => number;
  close(): Promise<void>;
}

type Rpc = Record<string, unknown>;

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
    readonly status = 200,
  ) {
    super(message);
  }
}

function asObject(v: unknown): Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
}

function decodeHeader(value: string): string {
  const m = /^=\?base64\?(.*)\?=$/.exec(value);
  return m ? Buffer.from(m[1] as string, 'base64').toString('utf8') : value;
}

export interface ModernServerOptions {
  /** How often a listen stream sends the updates of its resources (ms). */
  updateEveryMs?: number;
  /**
   * false: the multi-round tool asks for input whatever the request's capabilities (a server that
   * does not check them, to see what the gateway does itself).
   */
  checkCapabilities?: boolean;
}

export async function startModernOnlyServer(options: ModernServerOptions = {}): Promise<ModernServer> {
  const { updateEveryMs = 100, checkCapabilities = true } = options;
  const received: Received[] = [];
  let listening = 0;
  let listensOpened = 0;
  let cancelled = 0;
  const timers = new Set<NodeJS.Timeout>();

  function json(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }

  function check(req: IncomingMessage, msg: Rpc): Record<string, unknown> {
    const params = asObject(msg.params);
    const m = asObject(params._meta);
    const version = m[`${meta}protocolVersion`];
    if (version !== modern) {
      const requested = version ?? params.protocolVersion ?? req.headers['mcp-protocol-version'] ?? '';
      throw new RpcError(
        -32022,
        'Unsupported protocol version',
        { supported: [modern], requested: String(requested) },
        400,
      );
    }
    const mismatch = (header: string, value: unknown) =>
      new RpcError(-32020, `Header mismatch: ${header}`, { header, value }, 400);
    if (req.headers['mcp-protocol-version'] !== version) throw mismatch('MCP-Protocol-Version', version);
    if (req.headers['mcp-method'] !== msg.method) throw mismatch('Mcp-Method', msg.method);
    const source =
      msg.method === 'resources/read'
        ? 'uri'
        : msg.method === 'tools/call' || msg.method === 'prompts/get'
          ? 'name'
          : undefined;
    if (source) {
      const shown = req.headers['mcp-name'];
      if (typeof shown !== 'string' || decodeHeader(shown) !== params[source])
        throw mismatch('Mcp-Name', params[source]);
    }
    const caps = m[`${meta}clientCapabilities`];
    if (caps === null || typeof caps !== 'object') {
      throw new RpcError(
        -32602,
        'Invalid params: _meta.io.modelcontextprotocol/clientCapabilities is required',
        undefined,
        400,
      );
    }
    return caps as Record<string, unknown>;
  }

  function complete(result: Record<string, unknown>, cache = false): Record<string, unknown> {
    return {
      resultType: 'complete',
      ...result,
      ...(cache ? { ttlMs: 60000, cacheScope: 'public' } : {}),
      _meta: { [`${meta}serverInfo`]: serverInfo },
    };
  }

  function callTool(params: Record<string, unknown>, caps: Record<string, unknown>): Record<string, unknown> {
    const args = asObject(params.arguments);
    switch (params.name) {
      case 'echo':
        return complete({ content: [{ type: 'text', text: `Echo: ${String(args.message)}` }] });
      case 'get-sum':
        return complete({
          content: [
            { type: 'text', text: `The sum of ${args.a} and ${args.b} is ${Number(args.a) + Number(args.b)}.` },
          ],
        });
      case 'trigger-elicitation-request': {
        if (checkCapabilities && caps.elicitation === undefined) {
          throw new RpcError(
            -32021,
            'Missing required client capability',
            { requiredCapabilities: { elicitation: {} } },
            400,
          );
        }
        const answer = asObject(params.inputResponses).name;
        if (params.requestState !== undefined && answer !== undefined) {
          if (params.requestState !== 'elicit-round-1')
            throw new RpcError(-32602, 'Invalid params: unknown requestState');
          return complete({ content: [{ type: 'text', text: `Elicitation answered: ${JSON.stringify(answer)}` }] });
        }
        return {
          resultType: 'input_required',
          inputRequests: {
            name: {
              method: 'elicitation/create',
              params: {
                mode: 'form',
                message: 'What is your name?',
                requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
              },
            },
          },
          requestState: 'elicit-round-1',
        };
      }
      case 'trigger-sampling-request': {
        if (checkCapabilities && caps.sampling === undefined) {
          throw new RpcError(
            -32021,
            'Missing required client capability',
            { requiredCapabilities: { sampling: {} } },
            400,
          );
        }
        const sampled = asObject(params.inputResponses).sample;
        if (params.requestState === 'sample-round-1' && sampled !== undefined) {
          return complete({ content: [{ type: 'text', text: `LLM sampling result: ${JSON.stringify(sampled)}` }] });
        }
        return {
          resultType: 'input_required',
          inputRequests: {
            sample: {
              method: 'sampling/createMessage',
              params: {
                messages: [{ role: 'user', content: { type: 'text', text: `context: ${String(args.prompt)}` } }],
                systemPrompt: 'You are a helpful test server.',
                maxTokens: Number(args.maxTokens ?? 100),
              },
            },
          },
          requestState: 'sample-round-1',
        };
      }
      default:
        throw new RpcError(-32602, `Unknown tool: ${String(params.name)}`);
    }
  }

  function dispatch(msg: Rpc, caps: Record<string, unknown>): Record<string, unknown> {
    const params = asObject(msg.params);
    switch (msg.method) {
      case 'server/discover':
        return {
          ...complete(
            {
              supportedVersions: [modern],
              capabilities: {
                tools: { listChanged: true },
                prompts: {},
                resources: { subscribe: true, listChanged: true },
              },
              instructions: 'A 2026-07-28-only test server.',
            },
            true,
          ),
        };
      case 'ping':
        return complete({});
      case 'tools/list':
        return complete({ tools }, true);
      case 'tools/call':
        return callTool(params, caps);
      case 'resources/list':
        return complete({ resources: [{ uri: staticUri, name: 'architecture.md', mimeType: 'text/markdown' }] }, true);
      case 'resources/templates/list':
        return complete({ resourceTemplates: [] }, true);
      case 'resources/read':
        if (params.uri !== staticUri) throw new RpcError(-32602, 'Resource not found', { uri: params.uri });
        return complete({ contents: [{ uri: staticUri, mimeType: 'text/markdown', text: '# Architecture' }] }, true);
      case 'prompts/list':
        return complete({ prompts: [{ name: 'simple-prompt', description: 'A prompt with no arguments' }] }, true);
      case 'prompts/get':
        if (params.name !== 'simple-prompt') throw new RpcError(-32602, `Unknown prompt: ${String(params.name)}`);
        return complete({
          messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt without arguments.' } }],
        });
      default:
        throw new RpcError(-32601, `Method not found: ${String(msg.method)}`, undefined, 404);
    }
  }

  function listen(res: ServerResponse, msg: Rpc): void {
    const filter = asObject(asObject(msg.params).notifications);
    const uris = Array.isArray(filter.resourceSubscriptions)
      ? filter.resourceSubscriptions.filter((u) => u === staticUri)
      : [];
    const tag = { [`${meta}subscriptionId`]: msg.id };
    const honored: Record<string, unknown> = {};
    if (filter.toolsListChanged === true) honored.toolsListChanged = true;
    if (filter.resourcesListChanged === true) honored.resourcesListChanged = true;
    if (uris.length > 0) honored.resourceSubscriptions = uris;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const send = (m: unknown) => res.write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
    send({
      jsonrpc: '2.0',
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: honored, _meta: tag },
    });
    listening++;
    listensOpened++;
    const timer = setInterval(() => {
      for (const uri of uris)
        send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri, _meta: tag } });
    }, updateEveryMs);
    timers.add(timer);
    res.once('close', () => {
      clearInterval(timer);
      timers.delete(timer);
      listening--;
    });
  }

  /** Its steps one every duration/steps seconds; with a progressToken and an event stream accepted, each step's progress first. */
  function longRunning(req: IncomingMessage, res: ServerResponse, msg: Rpc): void {
    const params = asObject(msg.params);
    const args = asObject(params.arguments);
    const duration = Number(args.duration ?? 10);
    const steps = Number(args.steps ?? 5);
    const token = asObject(params._meta).progressToken;
    const events = token !== undefined && /text\/event-stream/.test(String(req.headers.accept));
    const send = (m: unknown) => res.write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
    if (events) res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    let step = 0;
    const timer = setInterval(
      () => {
        step++;
        if (events) {
          send({
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: { progressToken: token, progress: step, total: steps },
          });
        }
        if (step < steps) return;
        clearInterval(timer);
        timers.delete(timer);
        const text = `Long running operation completed. Duration: ${duration} seconds, Steps: ${steps}.`;
        const response = { jsonrpc: '2.0', id: msg.id, result: complete({ content: [{ type: 'text', text }] }) };
        if (events) {
          send(response);
          res.end();
        } else json(res, 200, response);
      },
      (duration * 1000) / steps,
    );
    timers.add(timer);
    res.once('close', () => {
      if (step < steps) cancelled++;
      clearInterval(timer);
      timers.delete(timer);
    });
  }

  const server = createServer((req, res) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return json(res, 404, { error: 'not found' });
    if (req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' });
      return res.end();
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let msg: Rpc;
      try {
        msg = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Rpc;
      } catch {
        return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      }
      if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) {
        return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } });
      }
      received.push({
        method: typeof msg.method === 'string' ? msg.method : undefined,
        headers: req.headers,
        body: msg,
      });
      if (typeof msg.method !== 'string') {
        // A response: this stateless server asks nothing over HTTP (input_required instead).
        return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32600, message: 'Invalid Request' } });
      }
      const id = msg.id ?? null;
      try {
        const caps = check(req, msg);
        if (msg.id === undefined) {
          res.writeHead(202);
          return res.end();
        }
        if (msg.method === 'subscriptions/listen') return listen(res, msg);
        const params = asObject(msg.params);
        if (msg.method === 'tools/call' && params.name === 'trigger-long-running-operation') {
          return longRunning(req, res, msg);
        }
        json(res, 200, { jsonrpc: '2.0', id, result: dispatch(msg, caps) });
      } catch (err) {
        if (!(err instanceof RpcError)) throw err;
        const error = { code: err.code, message: err.message, ...(err.data !== undefined ? { data: err.data } : {}) };
        json(res, err.status, { jsonrpc: '2.0', id, error });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    received,
    listening: () => listening,
    listensOpened: () => listensOpened,
    cancelled: () => cancelled,
    close: async () => {
      for (const t of timers) clearInterval(t);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
