/**
 * proxy: the terminal stage that sends the request to a named upstream and leaves its answer on
 * `ctx.state.answer` for the answer phase of the stages before it. HTTP upstreams get the request
 * forwarded (their answer streams back as it came unless a stage reads it); RPC upstreams (stdio
 * children) get the JSON-RPC message called, and the response message is the answer.
 *
 * A list of HTTP upstreams (`upstream: [a, b]`, or a list an earlier stage chose, e.g. a tenant's
 * backends) is a list of providers tried in turn (failover.ts); `ctx.state.providers` says which
 * one served and which failed before it.
 */
import { Readable } from 'node:stream';
import {
  Answer,
  type DryRunAnswer,
  definePlugin,
  type FromSchema,
  type GatewayContext,
  isHttpUpstream,
  isRpcUpstream,
  type JsonRpcRequest,
  type JsonSchema,
  labelledSeries,
  latencyBuckets,
  type ProviderFailure,
  type Stage,
  syncStage,
  type Upstream,
} from '../../runtime/index.ts';
import { mayMapLegacy, proxyLegacyHttp } from './era-2025-client.ts';
import { heldSessionsOf, modernVersionOf, proxyModern } from './era-2026.ts';
import { proxyModernHttp } from './era-2026-http.ts';
import { requestHeaderNames } from './headers.ts';
import { proxyHttp } from './http.ts';
import { proxyRpc } from './rpc.ts';
import { SessionBinding } from './session-binding.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['upstream'],
  properties: {
    upstream: {
      // One type list rather than a oneOf: a misspelt name is then one error naming it, not three.
      type: ['string', 'array'],
      'x-ref': 'upstream',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', 'x-ref': 'upstream' },
      description:
        'Name of an upstream declared under `upstreams:`, or an ordered list of HTTP upstreams (providers): ' +
        'the next is tried on a connect failure, a timeout, a 5xx or 429 answer, before any of an answer was sent.',
    },
    cooldown_ms: {
      type: 'integer',
      minimum: 0,
      default: 30000,
      description:
        'How long a provider of a list that failed is tried after the others (its Retry-After when it sent one, ' +
        'at most 300 s); 0: always in list order.',
    },
    first_byte_timeout_ms: {
      type: 'integer',
      minimum: 1,
      default: 120000,
      description:
        'With a list of providers: how long a streamed answer may take from its headers to its first byte before ' +
        'the next provider is tried (a provider that sends headers and then hangs); without a list, not used.',
    },
    timeout_ms: {
      type: 'integer',
      minimum: 1,
      description:
        "Overrides the upstream's `timeout_ms`: the time allowed for the answer's headers; with the upstream's " +
        '`retry:` (or several endpoints), for the whole request, every try and backoff included. An answer that a ' +
        'stage reads whole (a policy, an audit) must also be complete within it from its headers (else ' +
        '`upstream_timeout`), so a stalled upstream never holds a request slot longer.',
    },
    forward_headers: {
      type: 'array',
      items: { type: 'string', pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$" },
      default: [],
      description:
        'Request headers passed upstream besides content-type, accept, mcp-session-id, mcp-protocol-version, ' +
        'mcp-method, mcp-name, mcp-param-* and last-event-id (e.g. authorization, which is never passed otherwise).',
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
    upstream_era: {
      enum: ['auto', 'legacy', 'modern', 'dual'],
      default: 'auto',
      description:
        'Which MCP revisions an MCP upstream over HTTP speaks: `legacy` (2025-11-25 and earlier: a 2026-07-28 ' +
        'client is mapped onto a session the gateway holds), `modern` (2026-07-28 only: a 2025 client is mapped, the ' +
        'gateway holding its session), `dual` (both forwarded as they came); `auto` asks the upstream once ' +
        '(server/discover, or the supported list of its -32022 answer).',
    },
    via: {
      enum: ['auto', 'forward', 'call'],
      default: 'auto',
      description:
        '`forward` relays the HTTP request (HTTP upstreams); `call` sends ctx.state.rpc as one JSON-RPC call ' +
        "(on a jsonrpc upstream through the gateway's own MCP session) and answers JSON; `auto` forwards when it can.",
    },
  },
} as const satisfies JsonSchema;
type ProxyOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ProxyOptions>({
  name: 'proxy',
  description: 'Forward the request to an upstream and stream its answer back (terminal stage).',
  provides: ['answer', 'providers'],
  options: optionsSchema,
  create(options, env) {
    const headerNames = requestHeaderNames(options.forward_headers);
    const via = options.via;

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

    const latencyOf = labelledSeries(latency);

    const failovers = env.metrics.counter({
      name: 'switchyard_upstream_failovers_total',
      help: 'Upstreams of a provider list given up on for a request (the next one was tried), by upstream and reason',
      labelNames: ['upstream', 'reason'] as const,
    });
    const http = {
      headerNames,
      timeoutMs: options.timeout_ms,
      cooldownMs: options.cooldown_ms,
      firstByteTimeoutMs: options.first_byte_timeout_ms,
      observe: (name: string, seconds: number) => latencyOf(name).observe(seconds),
      sessions: new SessionBinding(),
    };

    /** How requests reach an upstream: forwarded over HTTP, or called as JSON-RPC. */
    function targetOf(name: string): Stage {
      const upstream: Upstream = env.upstream(name);
      const httpUpstream = via !== 'call' && isHttpUpstream(upstream) ? upstream : undefined;
      const rpc = !httpUpstream && via !== 'forward' && isRpcUpstream(upstream) ? upstream : undefined;
      if (httpUpstream) return providersOf([name]);
      if (rpc) {
        const timer = latencyOf(name);
        // Modern (2026-07-28) clients of an upstream that keeps legacy sessions: era-2026.ts.
        const held = via !== 'call' && rpc.sessions ? heldSessionsOf(rpc, rpc.sessions) : undefined;
        return async (ctx) => {
          const started = performance.now();
          try {
            const message = ctx.state.rpc;
            if (held && message && ctx.method === 'POST' && modernVersionOf(message) !== undefined) {
              await proxyModern(ctx, held, message, options.timeout_ms);
              return;
            }
            // The typed-send route (via: call) speaks for the gateway: its own server session.
            await proxyRpc(ctx, rpc, options.timeout_ms, via === 'call' ? undefined : rpc.sessions);
          } finally {
            timer.observe((performance.now() - started) / 1000);
          }
        };
      }
      throw new Error(`upstream "${name}" (${upstream.kind}) cannot be used via ${via}`);
    }

    /** HTTP upstreams tried in turn (one: forwarded as it is). */
    function providersOf(names: readonly string[]): Stage {
      const list = names.map((name) => {
        const upstream: Upstream = env.upstream(name);
        if (via === 'call' || !isHttpUpstream(upstream)) {
          throw new Error(`upstream "${name}" (${upstream.kind}) cannot be one of a list of providers: HTTP only`);
        }
        return upstream;
      });
      const onFailover =
        list.length > 1
          ? (requestId: string) => (f: ProviderFailure) => {
              failovers.inc({ upstream: f.upstream, reason: f.reason });
              env.logger.warn(
                { request_id: requestId, upstream: f.upstream, reason: f.reason, status: f.status },
                'provider failed; trying the next one',
              );
            }
          : undefined;
      // A modern (2026-07-28) client of one MCP upstream: forwarded, or mapped when it speaks 2025 only.
      const mcp = via !== 'call' && list.length === 1 && list[0]?.kind === 'jsonrpc' ? list[0] : undefined;
      /** A request of the other MCP era than its upstream's, or a modern one: mapped, or forwarded when it need not be. */
      const acrossEras = async (
        ctx: GatewayContext,
        server: NonNullable<typeof mcp>,
        path: string,
        /** The request, when it is a modern one (else a legacy client's, to map). */
        modern: JsonRpcRequest | undefined,
      ) => {
        const started = performance.now();
        if (modern) {
          try {
            if (await proxyModernHttp(ctx, server, modern, path, options.timeout_ms, options.upstream_era)) return;
          } finally {
            http.observe(server.name, (performance.now() - started) / 1000);
          }
        } else {
          // A legacy client of an upstream that speaks only 2026-07-28: era-2025-client.ts.
          let forwarded = false;
          try {
            forwarded = !(await proxyLegacyHttp(ctx, server, path, options.upstream_era, options.timeout_ms));
          } finally {
            if (!forwarded) http.observe(server.name, (performance.now() - started) / 1000);
          }
          if (!forwarded) return;
        }
        return proxyHttp(ctx, list, http, path, onFailover?.(ctx.state.requestId));
      };
      // No async frame of its own for a request forwarded as it is (docs/performance.md, "Work per request").
      return syncStage((ctx) => {
        const path = options.path ?? upstreamPath(ctx.url);
        const rpc = ctx.state.rpc;
        const modern = mcp && rpc && ctx.method === 'POST' && modernVersionOf(rpc) !== undefined ? rpc : undefined;
        if (mcp && (modern || mayMapLegacy(ctx, mcp, options.upstream_era))) return acrossEras(ctx, mcp, path, modern);
        return proxyHttp(ctx, list, http, path, onFailover?.(ctx.state.requestId));
      });
    }

    const names = typeof options.upstream === 'string' ? [options.upstream] : options.upstream;
    const upstream: Upstream = env.upstream(names[0] as string);
    const fallback = names.length === 1 ? targetOf(names[0] as string) : providersOf(names);
    // Upstreams an earlier stage chose (ctx.state.upstream, e.g. a tenant's backends), made on first use.
    const chosen = new Map<string, Stage>([[names.join('\n'), fallback]]);

    return {
      handle(ctx, next) {
        const choice = ctx.state.upstream;
        if (choice === undefined) return fallback(ctx, next);
        const key = typeof choice === 'string' ? choice : choice.join('\n');
        let target = chosen.get(key);
        if (!target) {
          target = typeof choice === 'string' || choice.length === 1 ? targetOf(key) : providersOf(choice);
          chosen.set(key, target);
        }
        return target(ctx, next);
      },
      // A dry run: the answer it brings, as if the upstream the request would reach had sent it.
      async dryRun(ctx) {
        const choice = ctx.state.upstream ?? names;
        ctx.state.providers = { served: typeof choice === 'string' ? choice : choice[0], failed: [] };
        ctx.state.answer = dryRunAnswer(ctx, ctx.state.dryRun?.answer);
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
      describe: () => ({ upstream: options.upstream, kind: upstream.kind, cooldown_ms: http.cooldownMs }),
    };
  },
});

/** The answer of a dry run: the one it brings (an event stream's events one chunk each), else 204. */
function dryRunAnswer(ctx: GatewayContext, answer: DryRunAnswer | undefined): Answer {
  if (!answer) return new Answer(ctx, { status: 204 });
  const headers: Record<string, string> = {};
  for (const name in answer.headers) headers[name.toLowerCase()] = answer.headers[name] as string;
  const sse = (headers['content-type'] ?? '').toLowerCase().startsWith('text/event-stream');
  const body = sse
    ? Readable.from(answer.body.split(/(?<=\n\n)/).map((event) => Buffer.from(event)))
    : Buffer.from(answer.body);
  return new Answer(ctx, { status: answer.status, headers, body });
}
