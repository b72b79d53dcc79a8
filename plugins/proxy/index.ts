/**
 * proxy: the terminal stage that sends the request to a named upstream and leaves its answer on
 * `ctx.state.answer` for the answer phase of the stages before it. HTTP upstreams get the request
 * forwarded (their answer streams back as it came unless a stage reads it); RPC upstreams (stdio
 * children) get the JSON-RPC message called, and the response message is the answer.
 */
import {
  definePlugin,
  isHttpUpstream,
  isRpcUpstream,
  latencyBuckets,
  type Stage,
  type Upstream,
} from '../../runtime/index.ts';
import { requestHeaderNames } from './headers.ts';
import { proxyHttp } from './http.ts';
import { proxyRpc } from './rpc.ts';

interface ProxyOptions {
  upstream: string;
  timeout_ms?: number;
  forward_headers: string[];
  path?: string;
  strip_prefix?: string;
  via: 'auto' | 'forward' | 'call';
}

export default definePlugin<ProxyOptions>({
  name: 'proxy',
  description: 'Forward the request to an upstream and stream its answer back (terminal stage).',
  provides: ['answer'],
  options: {
    type: 'object',
    additionalProperties: false,
    required: ['upstream'],
    properties: {
      upstream: {
        type: 'string',
        'x-ref': 'upstream',
        description: 'Name of an upstream declared under `upstreams:`.',
      },
      timeout_ms: { type: 'integer', minimum: 1, description: "Overrides the upstream's response timeout." },
      forward_headers: {
        type: 'array',
        items: { type: 'string', pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" },
        default: [],
        description:
          'Request headers passed upstream besides content-type, accept, mcp-session-id, ' +
          'mcp-protocol-version and last-event-id (e.g. authorization, which is never passed otherwise).',
      },
      path: {
        type: 'string',
        pattern: '^/',
        description: "Fixed upstream path; default: the request's path and query.",
      },
      strip_prefix: {
        type: 'string',
        pattern: '^/.*[^/]$',
        description:
          "Removed from the start of the request's path before it is appended to the upstream's base URL " +
          '(e.g. `/v1` when the upstream URL is an OpenAI-style base ending in /v1).',
      },
      via: {
        enum: ['auto', 'forward', 'call'],
        default: 'auto',
        description:
          '`forward` relays the HTTP request (HTTP upstreams); `call` sends ctx.state.rpc as one JSON-RPC call ' +
          "(on a jsonrpc upstream through the gateway's own MCP session) and answers JSON; `auto` forwards when it can.",
      },
    },
  },
  create(options, env) {
    const headerNames = requestHeaderNames(options.forward_headers);
    const via = options.via ?? 'auto';

    const prefix = options.strip_prefix;
    /** The request's path and query as the upstream sees them. */
    const upstreamPath = (url: string): string => {
      if (!prefix || !url.startsWith(prefix)) return url;
      const rest = url.slice(prefix.length);
      return rest === '' || rest.startsWith('/') || rest.startsWith('?') ? rest || '/' : url;
    };

    const latency = env.metrics.histogram({
      name: 'switchyard_upstream_response_seconds',
      help: 'Time from sending a request upstream to its answer starting (headers; whole body when small), by upstream',
      labelNames: ['upstream'] as const,
      buckets: latencyBuckets,
    });

    /** How requests reach an upstream: forwarded over HTTP, or called as JSON-RPC. */
    function targetOf(name: string): Stage {
      const upstream: Upstream = env.upstream(name);
      const http = via !== 'call' && isHttpUpstream(upstream) ? upstream : undefined;
      const rpc = !http && via !== 'forward' && isRpcUpstream(upstream) ? upstream : undefined;
      const timer = latency.labels(name);
      if (http) {
        return async (ctx) => {
          const started = performance.now();
          try {
            await proxyHttp(ctx, http, {
              headerNames,
              path: options.path ?? upstreamPath(ctx.url),
              timeoutMs: options.timeout_ms,
            });
          } finally {
            timer.observe((performance.now() - started) / 1000);
          }
        };
      }
      if (rpc) {
        return async (ctx) => {
          const started = performance.now();
          try {
            // The typed-send route (via: call) speaks for the gateway: its own server session.
            await proxyRpc(ctx, rpc, options.timeout_ms, via === 'call' ? undefined : rpc.sessions);
          } finally {
            timer.observe((performance.now() - started) / 1000);
          }
        };
      }
      throw new Error(`upstream "${name}" (${upstream.kind}) cannot be used via ${via}`);
    }

    const upstream: Upstream = env.upstream(options.upstream);
    const fallback = targetOf(options.upstream);
    // Upstreams an earlier stage chose (ctx.state.upstream, e.g. a tenant's backend), made on first use.
    const chosen = new Map<string, Stage>([[options.upstream, fallback]]);

    return {
      handle(ctx, next) {
        const name = ctx.state.upstream;
        if (name === undefined) return fallback(ctx, next);
        let target = chosen.get(name);
        if (!target) {
          target = targetOf(name);
          chosen.set(name, target);
        }
        return target(ctx, next);
      },
      health() {
        const h = upstream.health();
        return {
          ok: h.connected,
          status: h.connected ? 'connected' : 'disconnected',
          error: h.error,
          detail: h.detail,
        };
      },
      describe: () => ({ upstream: options.upstream, kind: upstream.kind }),
    };
  },
});
