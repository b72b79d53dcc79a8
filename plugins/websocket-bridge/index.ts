/**
 * websocket-bridge: a WebSocket endpoint in front of an HTTP route of the same service (terminal
 * stage of a GET route). The handshake is taken through the runtime's upgrade hook; then each
 * text message is POSTed, over loopback to the service's own main listener, to the `target`
 * route, with the handshake's Authorization (and the other `forward_headers`) and with the
 * `force` fields set. Every check of the target route (auth, rate limit, classifiers, policy,
 * audit) therefore applies to each message unchanged. The answer comes back as frames: see
 * relay.ts. A plain GET on the route is `426 Upgrade Required`.
 *
 * Browsers cannot set headers on a WebSocket. A client without an Authorization header may offer a
 * subprotocol `<token_protocol><base64url of the key>` (e.g. `authorization.bearer.c2stZGV2`); the
 * bridge then sends `Authorization: Bearer <key>` with each message. That protocol is never the
 * one selected: the first other protocol offered is (a browser that offers protocols fails the
 * connection unless one is selected, so it offers a second one, e.g. `chat`).
 *
 * Messages are size-limited by the service's `limits.body_bytes` (a bigger one closes the socket
 * with 1009, as WebSocket requires). A socket idle for `idle_timeout_ms` is closed (1000). The
 * handshake itself passes the stages in front of the bridge on its route (put the auth stage
 * there): a wrong or missing key is refused before the upgrade. Open sockets are closed with 1001 when the graph is retired
 * (after a reload's drain timeout) or the service stops.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { Agent } from 'undici';
import { type WebSocket, WebSocketServer } from 'ws';
import {
  definePlugin,
  type FromSchema,
  GatewayError,
  type JsonSchema,
  type UpgradedConnection,
} from '../../runtime/index.ts';
import { type Outcome, Relay } from './relay.ts';

/** How long close() waits for clients to answer the close frame before cutting them. */
const closeGraceMs = 1000;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['target'],
  properties: {
    target: {
      type: 'string',
      pattern: '^/',
      description: 'Path of the route of this service each message is POSTed to, e.g. /v1/chat/completions.',
    },
    force: {
      type: 'object',
      default: { stream: true },
      description: 'Fields set on every message before it is sent (they replace the client values).',
    },
    forward_headers: {
      type: 'array',
      items: { type: 'string', pattern: '^[A-Za-z0-9-]+$' },
      default: ['authorization', 'traceparent'],
      description:
        'Headers of the handshake sent with every message. X-Request-Id (<handshake id>.<n>) and X-Forwarded-For are always sent.',
    },
    max_queued: {
      type: 'integer',
      minimum: 0,
      default: 8,
      description: 'Messages that may wait behind the one being answered; more get an error frame.',
    },
    ping_interval_ms: {
      type: 'integer',
      minimum: 0,
      default: 30000,
      description:
        'Ping every client this often and drop those that did not answer the previous ping (0: never). Keeps idle sockets alive through load balancers.',
    },
    idle_timeout_ms: {
      type: 'integer',
      minimum: 0,
      default: 300000,
      description:
        'Close a socket (code 1000) that has sent no message for this long while no answer is being relayed; pings do not count (0: never).',
    },
    token_protocol: {
      type: 'string',
      default: 'authorization.bearer.',
      pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]*$",
      description:
        'Prefix of an offered subprotocol carrying the API key (base64url) for clients that cannot send ' +
        'Authorization (browsers); used only when the handshake has no Authorization header. Empty: off.',
    },
  },
} as const satisfies JsonSchema;
type BridgeOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<BridgeOptions>({
  name: 'websocket-bridge',
  description:
    'WebSocket endpoint (GET route, terminal): each JSON message is POSTed to another route of the same service and its SSE answer relayed as frames.',
  options: optionsSchema,
  create(options, env) {
    const force = options.force;
    const forward = options.forward_headers.map((h) => h.toLowerCase());
    const maxQueued = options.max_queued;
    const pingMs = options.ping_interval_ms;
    const idleMs = options.idle_timeout_ms;
    const tokenPrefix = options.token_protocol;
    const isToken = (protocol: string) => tokenPrefix !== '' && protocol.startsWith(tokenPrefix);
    // Keep-alive connections to our own listener; an SSE answer may pause for long (bodyTimeout 0).
    const agent = new Agent({ bodyTimeout: 0, keepAliveTimeout: 30000 });
    const messages = env.metrics.counter({
      name: 'switchyard_websocket_bridge_messages_total',
      help: 'WebSocket messages relayed, by route and outcome (streamed|refused|invalid|failed|aborted)',
      labelNames: ['route', 'outcome'] as const,
    });

    // Handshakes waiting for ws: a refusal ws reports ('wsClientError') rejects the right one.
    const handshakes = new Map<Duplex, (err: Error) => void>();
    const requestIds = new WeakMap<IncomingMessage, string>();
    const alive = new WeakSet<WebSocket>();
    let wss: WebSocketServer | undefined;
    let pinger: NodeJS.Timeout | undefined;

    // The limits are the graph's, the same for every handshake: the server is made at the first one.
    const server = (maxPayload: number): WebSocketServer => {
      if (wss) return wss;
      wss = new WebSocketServer({
        noServer: true,
        maxPayload,
        perMessageDeflate: false,
        // Never select (and so echo) the protocol carrying a key.
        handleProtocols: (offered) => [...offered].find((p) => !isToken(p)) ?? false,
      });
      wss.on('wsClientError', (err, socket) => {
        const refuse = handshakes.get(socket);
        if (refuse) refuse(new GatewayError('bad_request', `WebSocket handshake refused: ${err.message}`));
        else socket.destroy();
      });
      wss.on('headers', (headers, req) => {
        const id = requestIds.get(req);
        if (id) headers.push(`X-Request-Id: ${id}`);
      });
      if (pingMs > 0) pinger = setInterval(() => pingAll(wss as WebSocketServer, alive), pingMs).unref();
      return wss;
    };

    return {
      async handle() {
        throw new GatewayError('bad_request', 'This route speaks WebSocket: connect with Upgrade: websocket', {
          status: 426,
          code: 'upgrade_required',
          headers: { Upgrade: 'websocket', Connection: 'Upgrade' },
        });
      },

      async upgrade(req, socket, head, { ctx, renderError }): Promise<UpgradedConnection> {
        const wss = server(ctx.state.limits.bodyBytes);
        requestIds.set(req, ctx.state.requestId);
        const ws = await new Promise<WebSocket>((resolve, reject) => {
          const gone = () => settle(new GatewayError('bad_request', 'The client left during the handshake'));
          const settle = (err?: Error, ws?: WebSocket) => {
            handshakes.delete(socket);
            socket.off('close', gone);
            if (ws) resolve(ws);
            else reject(err);
          };
          handshakes.set(socket, settle);
          socket.once('close', gone);
          wss.handleUpgrade(req, socket, head, (ws) => settle(undefined, ws));
        });

        // Protocol errors (a message over the limit: 1009...) close the socket; ws reports them here.
        ws.on('error', (err) => env.logger.debug({ err, request_id: ctx.state.requestId }, 'websocket error'));
        alive.add(ws);
        ws.on('pong', () => alive.add(ws));
        const prior = ctx.get('x-forwarded-for');
        const peer = req.socket.remoteAddress ?? '';
        const headers: Record<string, string> = {
          'content-type': 'application/json',
          accept: 'text/event-stream, application/json',
          'x-forwarded-for': prior ? `${prior}, ${peer}` : peer,
        };
        for (const name of forward) {
          const value = ctx.get(name);
          if (value) headers[name] = value;
        }
        if (!ctx.get('authorization') && forward.includes('authorization')) {
          const key = protocolKey(ctx.get('sec-websocket-protocol'), isToken, tokenPrefix);
          if (key) headers.authorization = `Bearer ${key}`;
        }
        const route = ctx.state.route;
        new Relay(ws, {
          targetUrl: () => {
            if (!env.service.mainUrl) throw new Error('the main listener is not up');
            return `${env.service.mainUrl}${options.target}`;
          },
          force,
          headers,
          requestId: ctx.state.requestId,
          maxQueued,
          idleMs,
          agent,
          renderError,
          logger: env.logger,
          count: (outcome: Outcome) => messages.inc({ route, outcome }),
        });
        return { shutdown: () => ws.close(1001, 'server shutting down') };
      },

      async close() {
        if (pinger) clearInterval(pinger);
        if (wss) {
          const clients = [...wss.clients];
          for (const ws of clients) ws.close(1001, 'server going away');
          const deadline = Date.now() + closeGraceMs;
          while (clients.some((ws) => ws.readyState !== ws.CLOSED) && Date.now() < deadline) {
            await new Promise((r) => setTimeout(r, 25));
          }
          for (const ws of clients) ws.terminate();
          wss.close();
        }
        await agent.destroy();
      },

      describe: () => ({
        target: options.target,
        force,
        forward_headers: forward,
        token_protocol: tokenPrefix,
        idle_timeout_ms: idleMs,
      }),
    };
  },
});

/** The key carried by an offered `<prefix><base64url>` subprotocol, if any. */
function protocolKey(offered: string, isToken: (p: string) => boolean, prefix: string): string | undefined {
  const token = offered
    .split(',')
    .map((p) => p.trim())
    .find(isToken);
  if (!token) return undefined;
  const key = Buffer.from(token.slice(prefix.length), 'base64url').toString('utf8');
  // A key is printable ASCII: anything else could not be a header value (the route will say 401).
  return /^[\x21-\x7e]+$/.test(key) ? key : undefined;
}

/** Drops the clients that did not answer the last ping, and pings the others. */
function pingAll(wss: WebSocketServer, alive: WeakSet<WebSocket>): void {
  for (const ws of wss.clients) {
    if (!alive.has(ws)) {
      ws.terminate();
      continue;
    }
    alive.delete(ws);
    ws.ping();
  }
}
