/**
 * token-limit: per-client tokens per window for OpenAI-style chat and completions requests,
 * next to the requests per window of `rate-limit`.
 *
 * Before the call the request reserves an estimate (token-count.ts: prompt counted with a
 * tokenizer in a worker thread shared per encoding, token-counter.ts, plus `max_completion_tokens` / `max_tokens` / `default_completion_tokens` per
 * choice); one that does not fit in what is left of the window is refused (429 `rate_limited`,
 * code `tokens`, Retry-After). After the answer the reservation is settled with the answer's
 * `usage.total_tokens` (tokens.ts: the difference refunded, or charged when the answer used
 * more). Counts are atomic in Redis, so gateway processes sharing a Redis share the budget.
 *
 * Streams: a streamed request (`stream: true`) that does not ask for usage gets
 * `stream_options.include_usage: true` on its way to the backend, and the usage-only chunk
 * (`choices: []`) that this adds is taken out of what the client receives; a client that asked
 * for it gets it. (The other chunks keep the `"usage": null` the backend then adds.)
 *
 * No usage (decided here, documented in docs/configuration.md):
 * - the backend did not answer with a success (an error from a later stage, a refused request,
 *   an upstream error status): nothing was generated, the whole reservation is refunded;
 * - a success without usage (a stream cut short or ended by the egress policy, a client gone, a
 *   backend that does not report usage): the reservation stands, the estimate counts.
 *
 * Headers (OpenAI's names): `X-RateLimit-Limit-Tokens`, `X-RateLimit-Remaining-Tokens` and
 * `X-RateLimit-Reset-Tokens` (time until the window ends, OpenAI's format: `1m30s`, `12s`), set
 * after the reservation (a whole answer: after the settle). Metrics: `switchyard_tokens_total
 * {tenant, kind}` (prompt, completion, and, counted separately, cached prompt and reasoning
 * tokens, from usage) and `switchyard_token_limit_decisions_total{decision, store}`. `tenant` is
 * `caller.attributes.tenant` (set by tenant-auth from its directory, so bounded), else `-`.
 */
import {
  answerOf,
  definePlugin,
  type GatewayContext,
  GatewayError,
  readJson,
  type SseEvent,
  type SseFilter,
  type SseVerdict,
  stateFieldOf,
} from '../../runtime/index.ts';
import { compileKey, compileLimitPath } from './keys.ts';
import { createLimiter, type Limiter } from './limiter.ts';
import { type LimiterConfig, limiterOptions, limiterProperties } from './options.ts';
import { estimateRequest } from './token-count.ts';
import { acquireTokenizer, type Tokenizer } from './token-counter.ts';
import type { Reservation, TokenCounter, TokenState } from './tokens.ts';

export interface TokenLimitOptions extends Omit<LimiterConfig, 'limit'> {
  limit?: number;
  limiter?: string;
  limit_from?: string;
  key?: string;
  default_completion_tokens: number;
  tokenizer: Tokenizer['encoding'] | 'estimate';
  exact_count_chars: number;
  stream_usage: boolean;
  headers: boolean;
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function count(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : 0;
}

/** `usage.total_tokens` (else prompt + completion) when the answer reports usage. */
function totalOf(usage: Json): number | undefined {
  if (typeof usage.total_tokens === 'number') return count(usage.total_tokens);
  if (typeof usage.prompt_tokens === 'number' || typeof usage.completion_tokens === 'number') {
    return count(usage.prompt_tokens) + count(usage.completion_tokens);
  }
  return undefined;
}

/** OpenAI's reset format: `1m30s`, `12s`, `250ms`. */
export function resetDuration(ms: number): string {
  if (ms < 1000) return `${Math.max(Math.ceil(ms), 0)}ms`;
  const seconds = Math.ceil(ms / 1000);
  const m = Math.floor(seconds / 60);
  return m > 0 ? `${m}m${seconds % 60}s` : `${seconds}s`;
}

export function tokenHeaders(state: TokenState): Record<string, string> {
  return {
    'X-RateLimit-Limit-Tokens': String(state.limit),
    'X-RateLimit-Remaining-Tokens': String(state.remaining),
    'X-RateLimit-Reset-Tokens': resetDuration(state.msLeft),
  };
}

// A usage object (not `"usage": null`): only such events are parsed.
const usageInEvent = /"usage"\s*:\s*\{/;

/** Reads the usage of a streamed answer as it passes; drops the usage-only chunk when asked to. */
class UsageFilter implements SseFilter {
  usage: Json | undefined;
  constructor(private readonly strip: boolean) {}

  onEvent(event: SseEvent): SseVerdict | undefined {
    if (!usageInEvent.test(event.data)) return undefined;
    let chunk: unknown;
    try {
      chunk = JSON.parse(event.data);
    } catch {
      return undefined; // not ours to refuse: the egress policy checks the stream's wire format
    }
    if (!isObject(chunk) || !isObject(chunk.usage)) return undefined;
    this.usage = chunk.usage;
    if (this.strip && Array.isArray(chunk.choices) && chunk.choices.length === 0) return { events: [] };
    return undefined;
  }
}

/** Waits for the tokenizer's worker to load, at most `ms`; the (referenced) timer also keeps
 * the process alive meanwhile, which the unreferenced worker does not. */
async function readyWithin(tokenizer: Tokenizer, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([tokenizer.ready(), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

export default definePlugin<TokenLimitOptions>({
  name: 'token-limit',
  // A dry run reserves nothing (see rate-limit).
  dryRun: 'skip',
  description:
    'Per-client tokens per window for OpenAI chat/completions: reserve an estimate, settle with the answer’s usage; X-RateLimit-*-Tokens headers',
  needs: (o) => [...(o.key === 'caller' ? (['caller'] as const) : []), ...stateFieldOf(o.limit_from)],
  provides: ['jsonModified'],
  options: {
    type: 'object',
    additionalProperties: false,
    anyOf: [
      { required: ['limit'], properties: { limit: true } },
      { required: ['limiter'], properties: { limiter: true } },
    ],
    properties: {
      ...limiterProperties,
      limit: { type: 'integer', minimum: 1, description: 'Tokens allowed per window and client' },
      prefix: {
        type: 'string',
        minLength: 1,
        description:
          'Store key prefix of an inline limiter (default `switchyard:rl:<service>`; tokens are under `<prefix>:tokens`)',
      },
      limiter: {
        type: 'string',
        minLength: 1,
        'x-ref': 'resource',
        description:
          'A `rate-limiter` resource whose store and window to count tokens in (under `<its prefix>:tokens`, apart from ' +
          'its request counts); its limit is not used: give `limit` or `limit_from`',
      },
      limit_from: {
        type: 'string',
        pattern: '^[A-Za-z_][A-Za-z0-9_]*(\\.[A-Za-z0-9_-]+)*$',
        description:
          'Dotted path in the request state giving the tokens per window, e.g. `caller.attributes.tokens_per_minute`; ' +
          '`limit` applies when it is not a positive integer, and without `limit` the request is not limited',
      },
      key: {
        type: 'string',
        pattern: "^(ip|caller|header:[A-Za-z0-9!#$%&'*+.^_`|~-]+)$",
        description:
          'What identifies a client, as for `rate-limit`; one budget per client across every route counting in the same store',
      },
      default_completion_tokens: {
        type: 'integer',
        minimum: 0,
        default: 1024,
        description:
          'Completion tokens reserved per choice when the request gives neither max_completion_tokens nor max_tokens',
      },
      tokenizer: {
        enum: ['o200k_base', 'cl100k_base', 'estimate'],
        default: 'o200k_base',
        description:
          'Encoding prompts are counted with (gpt-tokenizer; o200k_base: GPT-4o and later, cl100k_base: GPT-4/3.5); ' +
          '`estimate`: one token per 3 bytes, as when gpt-tokenizer is not installed',
      },
      exact_count_chars: {
        type: 'integer',
        minimum: 0,
        default: 65536,
        description:
          'Prompt characters counted with the tokenizer (in its worker thread, at most 25 ms of it); the rest is estimated',
      },
      stream_usage: {
        type: 'boolean',
        default: true,
        description:
          'Ask the backend for a streamed answer’s usage (stream_options.include_usage) when the client did not, and strip ' +
          'it from the client’s stream; false for a backend that refuses the field (such streams keep their estimate)',
      },
      headers: { type: 'boolean', default: true, description: 'Send X-RateLimit-*-Tokens headers' },
    },
  },
  async create(options, env) {
    let limiter: Limiter;
    let owned = false;
    if (options.limiter) {
      limiter = env.resource<Limiter>(options.limiter);
      if (typeof limiter?.tokens?.reserve !== 'function')
        throw new Error(`resource "${options.limiter}" is not a rate-limiter`);
    } else {
      if (options.limit === undefined) throw new Error('token-limit needs `limit` or `limiter`');
      const config = { ...options, limit: options.limit };
      limiter = await createLimiter(limiterOptions(config, `switchyard:rl:${env.service.name}`, env.logger));
      owned = true;
    }
    const tokens: TokenCounter = limiter.tokens;
    const windowSeconds = limiter.windowSeconds;
    const fallbackLimit = options.limit;
    const limitFrom = options.limit_from ? compileLimitPath(options.limit_from) : undefined;
    const clientKey = compileKey(options.key);
    const sendHeaders = options.headers ?? true;
    const defaultCompletion = options.default_completion_tokens ?? 1024;
    const exactChars = options.exact_count_chars ?? 65536;
    const encoding = options.tokenizer ?? 'o200k_base';
    const askStreamUsage = options.stream_usage ?? true;
    // The process's tokenizer worker for this encoding (token-counter.ts), shared with other
    // stages. Its import (a few hundred ms) runs in the worker, off this event loop; the service
    // waits for it (at most 10 s, then counts are estimated until it is ready) so the first
    // requests are counted too.
    const tokenizer = encoding === 'estimate' ? undefined : acquireTokenizer(encoding, env.logger);
    if (tokenizer) await readyWithin(tokenizer, 10_000);
    const decisions = env.metrics.counter({
      name: 'switchyard_token_limit_decisions_total',
      help: 'Token-limit reservations, by decision (allowed|limited) and the store that answered',
      labelNames: ['decision', 'store'] as const,
    });
    const used = env.metrics.counter({
      name: 'switchyard_tokens_total',
      help: 'Tokens the backend reported in answers’ usage, by tenant and kind (prompt|completion|cached|reasoning; cached and reasoning are part of prompt and completion)',
      labelNames: ['tenant', 'kind'] as const,
    });

    function countUsage(ctx: GatewayContext, usage: Json): void {
      const attrs = ctx.state.caller?.attributes as Json | undefined;
      const tenant = typeof attrs?.tenant === 'string' ? attrs.tenant : '-';
      const prompt = count(usage.prompt_tokens);
      const completion = count(usage.completion_tokens);
      const cached = isObject(usage.prompt_tokens_details) ? count(usage.prompt_tokens_details.cached_tokens) : 0;
      const reasoning = isObject(usage.completion_tokens_details)
        ? count(usage.completion_tokens_details.reasoning_tokens)
        : 0;
      if (prompt) used.inc({ tenant, kind: 'prompt' }, prompt);
      if (completion) used.inc({ tenant, kind: 'completion' }, completion);
      if (cached) used.inc({ tenant, kind: 'cached' }, cached);
      if (reasoning) used.inc({ tenant, kind: 'reasoning' }, reasoning);
    }

    /** Settles; never throws (the answer is not the settle's to fail): a store error is logged. */
    async function settle(
      ctx: GatewayContext,
      r: Reservation,
      actual: number,
      limit: number,
    ): Promise<TokenState | undefined> {
      if (actual === r.points) return undefined;
      try {
        return await tokens.settle(r, actual, limit);
      } catch (err) {
        env.logger.warn(
          { request_id: ctx.state.requestId, err: (err as Error).message, reserved: r.points, actual },
          'token limit: settling a reservation failed; the estimate stands',
        );
        return undefined;
      }
    }

    return {
      async handle(ctx, next) {
        const limit = limitFrom?.(ctx) ?? fallbackLimit;
        if (limit === undefined) return next();
        const body = await readJson(ctx);
        const estimate = await estimateRequest(body, {
          count: tokenizer?.count,
          exactChars,
          defaultCompletionTokens: defaultCompletion,
        });
        const result = await tokens.reserve(clientKey(ctx), estimate.total, limit);
        decisions.inc({ decision: result.allowed ? 'allowed' : 'limited', store: result.store });
        if (sendHeaders) ctx.set(tokenHeaders(result));
        if (!result.allowed || !result.reservation) {
          const retryAfter = Math.max(1, Math.ceil(result.msLeft / 1000));
          const tooLarge = estimate.total > limit;
          throw new GatewayError(
            'rate_limited',
            tooLarge
              ? `Request too large: it may use ${estimate.total} tokens, more than the limit of ${limit} per ${windowSeconds}s`
              : `Rate limit exceeded: ${limit} tokens per ${windowSeconds}s (requested ${estimate.total}, remaining ${result.remaining})`,
            {
              code: 'tokens',
              details: {
                limit,
                window_seconds: windowSeconds,
                requested: estimate.total,
                remaining: result.remaining,
                reset: result.resetAt,
              },
              extra: { retry_after_seconds: retryAfter },
              headers: { 'Retry-After': String(retryAfter), ...(sendHeaders ? tokenHeaders(result) : {}) },
            },
          );
        }
        const reservation = result.reservation;

        // Streams: ask the backend for usage when the client did not.
        let strip = false;
        if (askStreamUsage && isObject(body) && body.stream === true) {
          const so = body.stream_options;
          if (!(isObject(so) && so.include_usage === true)) {
            body.stream_options = { ...(isObject(so) ? so : {}), include_usage: true };
            ctx.state.jsonModified = true;
            strip = true;
          }
        }

        try {
          await next();
        } catch (err) {
          // A later stage refused (or the backend failed): usage only if a whole answer was read.
          const answered = ctx.state.answer;
          const usage = answered && isObject(answered.readJson) ? answered.readJson.usage : undefined;
          if (isObject(usage)) {
            countUsage(ctx, usage);
            await settle(ctx, reservation, totalOf(usage) ?? reservation.points, limit);
          } else if (!answered || answered.status >= 400) {
            // Refused before the backend answered, or the backend failed: nothing was generated.
            await settle(ctx, reservation, 0, limit);
          }
          throw err;
        }

        const answer = answerOf(ctx);
        if (answer.status >= 400) {
          // An error answer (the backend's, or a later stage's): nothing was generated.
          await settle(ctx, reservation, 0, limit);
          return;
        }
        if (answer.isEventStream) {
          const filter = new UsageFilter(strip);
          answer.filterEvents(filter);
          // Settled once the answer is written or the client went away, whichever comes first.
          ctx.res.once('close', () => {
            const usage = filter.usage;
            if (usage) countUsage(ctx, usage);
            const actual = usage ? totalOf(usage) : undefined;
            if (actual !== undefined) void settle(ctx, reservation, actual, limit);
          });
          return;
        }
        if (!answer.hasBody || !/json/.test(answer.contentType)) return;
        // Read only what can be read whole (a failed read would consume the body): an answer of
        // unknown or too large a size, not read by a stage before, keeps the estimate.
        const declared = Number(answer.headers['content-length'] ?? Number.NaN);
        if (answer.readJson === undefined && !(declared <= ctx.state.limits.answerBytes)) return;
        // An answer that cannot be read after all (cut short, undecodable): on_uninspectable decides.
        const json = await answer.json();
        const usage = isObject(json) ? json.usage : undefined;
        if (!isObject(usage)) return;
        countUsage(ctx, usage);
        const actual = totalOf(usage);
        if (actual === undefined) return;
        const settled = await settle(ctx, reservation, actual, limit);
        if (settled && sendHeaders) ctx.set(tokenHeaders(settled));
      },
      health: () => limiter.health(),
      describe: () => ({
        ...(fallbackLimit !== undefined ? { limit: fallbackLimit } : {}),
        window_seconds: windowSeconds,
        backend: limiter.backend,
        tokenizer: tokenizer?.available() ? encoding : 'estimate',
        default_completion_tokens: defaultCompletion,
        ...(options.limiter ? { limiter: options.limiter } : {}),
        ...(options.limit_from ? { limit_from: options.limit_from } : {}),
      }),
      async close() {
        await tokenizer?.release();
        if (owned) await limiter.close();
      },
    };
  },
});
