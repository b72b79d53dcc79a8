/**
 * token-limit: per-client tokens per window for OpenAI-style chat, completions and embeddings
 * requests, next to the requests per window of `rate-limit`.
 *
 * Before the call the request reserves an estimate (token-count.ts: prompt counted with a
 * tokenizer in a worker thread shared per encoding, token-counter.ts, plus the completion tokens
 * per choice; an embeddings request (a path ending in `/embeddings`): its input's tokens); one
 * that does not fit in what is left of the window is refused (429 `rate_limited`, code `tokens`,
 * Retry-After). A request the window has room for even at one token per byte of its prompt (no
 * text has more tokens than bytes) is admitted uncounted, reserving that bound: counting could
 * not change its admission or its cap (docs/configuration.md#token-limits). After the answer the
 * reservation is settled with the answer's `usage.total_tokens` (tokens.ts: the difference
 * refunded, or charged when the answer used more, as debt into the next windows when the window
 * cannot hold it). Counts are atomic in Redis, so gateway processes sharing a Redis share the
 * budget.
 *
 * The cap (decided here, documented in docs/configuration.md#token-limits): the answer is bounded
 * by the budget, not by the model.
 * - A chat or completions request that gives no `max_completion_tokens` / `max_tokens` gets one:
 *   what is left of the window after its prompt, at most `default_completion_tokens` per choice
 *   (a provider refuses a cap above the model's output limit), reserved whole and sent upstream
 *   in `cap_field` (`max_tokens` by default; legacy completions always `max_tokens`). When less
 *   than `min_completion_tokens` per choice is left, it is refused (429) with what is left.
 * - A request whose own cap does not fit in what is left is refused, not lowered (as OpenAI's own
 *   rate limits do): the client chose the answer's length, and a silently shorter answer would
 *   look complete to it (`finish_reason: length` aside). Retry-After says when it fits.
 * - `cap_field: none` sends no cap (for a backend that refuses both fields): the reservation is
 *   `default_completion_tokens` per choice, and an answer beyond it is charged as debt.
 *
 * Streams: a streamed request (`stream: true`) that does not ask for usage gets
 * `stream_options.include_usage: true` on its way to the backend, and the usage-only chunk
 * (`choices: []`) that this adds is taken out of what the client receives; a client that asked
 * for it gets it. (The other chunks keep the `"usage": null` the backend then adds.)
 *
 * No usage (decided here, documented in docs/configuration.md):
 * - the backend did not answer with a success (an error from a later stage, a refused request,
 *   an upstream error status): nothing was generated, the whole reservation is refunded;
 * - a success without usage (a backend that does not report it, a stream cut short or ended by
 *   the egress policy, a client gone): the prompt's count plus the generated text that passed,
 *   counted with the tokenizer (a stream's text as its events pass; a whole answer's choices,
 *   read here or by a later stage); only an answer no stage could read keeps the estimate.
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
  type FromSchema,
  type GatewayContext,
  GatewayError,
  type JsonSchema,
  type OpenAIChunk,
  type OpenAIStreamReader,
  readJson,
  requestOf,
  type SseVerdict,
  type StageAnswer,
  stateFieldOf,
} from '../../runtime/index.ts';
import { estimateTokens } from './bounded-count.ts';
import { compileKey, compileLimitPath } from './keys.ts';
import { createLimiter, type Limiter } from './limiter.ts';
import { limiterOptions, limiterProperties, limitOrLimiter } from './options.ts';
import { countPrompt, type Estimate, estimateOf, generatedText, promptBound, requestTokens } from './token-count.ts';
import { acquireTokenizer, type Tokenizer } from './token-counter.ts';
import type { Reservation, ReserveResult, TokenCounter, TokenState } from './tokens.ts';

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

/**
 * A streamed answer's generated text, kept for the tokenizer up to `exactChars` characters; of
 * the rest only its length is kept (counted as token-count.ts completes a long prompt).
 */
class TextTally {
  kept = '';
  restChars = 0;
  restBytes = 0;
  constructor(private readonly exactChars: number) {}

  add(text: string): void {
    if (text === '') return;
    const room = this.exactChars - this.kept.length;
    const head = room > 0 ? text.slice(0, room) : '';
    if (head) this.kept += head;
    if (head.length < text.length) {
      const rest = text.slice(head.length);
      this.restChars += rest.length;
      this.restBytes += Buffer.byteLength(rest, 'utf8');
    }
  }

  async tokens(count: ((text: string, exactChars: number) => Promise<number>) | undefined): Promise<number> {
    const counted = this.kept === '' ? 0 : count ? await count(this.kept, this.exactChars) : estimateTokens(this.kept);
    if (this.restChars === 0) return counted;
    const byRatio = this.kept.length > 0 ? Math.ceil((this.restChars * counted) / this.kept.length) : 0;
    return counted + Math.max(byRatio, Math.ceil(this.restBytes / 3));
  }
}

/**
 * Reads a streamed answer as it passes: its usage (the usage-only chunk dropped when asked to)
 * and the text its chunks generate, for an answer that ends without usage.
 */
class UsageFilter implements OpenAIStreamReader {
  usage: Json | undefined;
  readonly text: TextTally;
  constructor(
    private readonly strip: boolean,
    exactChars: number,
  ) {
    this.text = new TextTally(exactChars);
  }

  onChunk(chunk: OpenAIChunk): SseVerdict | undefined {
    if (this.usage === undefined) this.text.add(chunk.text);
    const usage = chunk.usage;
    if (!usage) return undefined;
    this.usage = usage as Json;
    const choices = chunk.json.choices;
    if (this.strip && Array.isArray(choices) && choices.length === 0) return { events: [] };
    return undefined;
  }
}

/** An embeddings request: its path's last segment (the OpenAI API's `/v1/embeddings`). */
const embeddingsPath = /(^|\/)embeddings\/?$/;

/** Waits for the tokenizer's worker to load, at most `ms`; the (referenced) timer also keeps
 * the process alive meanwhile, which the unreferenced worker does not. */
async function readyWithin(tokenizer: Tokenizer, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([tokenizer.ready(), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  anyOf: limitOrLimiter,
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
      minimum: 1,
      default: 4096,
      description:
        'The most completion tokens per choice a request that gives neither max_completion_tokens nor max_tokens is ' +
        'capped at (reserved, and sent upstream in `cap_field`); less when less is left of the window after its prompt',
    },
    min_completion_tokens: {
      type: 'integer',
      minimum: 1,
      default: 64,
      description:
        'A request without a cap of its own is refused (429, with what is left) when less than this per choice is ' +
        'left of the window after its prompt',
    },
    cap_field: {
      enum: ['max_tokens', 'max_completion_tokens', 'none'],
      default: 'max_tokens',
      description:
        'Field a chat request without a cap of its own gets its cap in (legacy completions: always max_tokens); ' +
        '`max_completion_tokens` for OpenAI’s reasoning models, which refuse max_tokens; `none`: no cap is sent ' +
        '(default_completion_tokens is reserved, and an answer beyond it is charged as debt)',
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
        'it from the client’s stream; false for a backend that refuses the field (such streams are counted from their text)',
    },
    headers: { type: 'boolean', default: true, description: 'Send X-RateLimit-*-Tokens headers' },
  },
} as const satisfies JsonSchema;
export type TokenLimitOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<TokenLimitOptions>({
  name: 'token-limit',
  // A dry run reserves nothing (see rate-limit).
  dryRun: 'skip',
  description:
    'Per-client tokens per window for OpenAI chat/completions/embeddings: reserve an estimate (an uncapped request capped at what is left), settle with the answer’s usage (or its counted text), overshoot carried as debt; X-RateLimit-*-Tokens headers',
  needs: (o) => [...(o.key === 'caller' ? (['caller'] as const) : []), ...stateFieldOf(o.limit_from)],
  options: optionsSchema,
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
    const sendHeaders = options.headers;
    const defaultCompletion = options.default_completion_tokens;
    // A floor above the default would refuse every uncapped request: it is the default then.
    const minCompletion = Math.min(options.min_completion_tokens, defaultCompletion);
    const capField = options.cap_field;
    const exactChars = options.exact_count_chars;
    const encoding = options.tokenizer;
    const askStreamUsage = options.stream_usage;
    // The process's tokenizer worker for this encoding (token-counter.ts), shared with other
    // stages. Its import (a few hundred ms) runs in the worker, off this event loop; the service
    // waits for it (at most 10 s, then counts are estimated until it is ready) so the first
    // requests are counted too.
    const tokenizer = encoding === 'estimate' ? undefined : acquireTokenizer(encoding, env.logger);
    if (tokenizer) await readyWithin(tokenizer, 10_000);
    // Before the service listens (its start, not a hot reload while it serves): the encoding on
    // this thread too, so that short prompts are counted without the worker's round trip.
    if (tokenizer && env.service.mainUrl === undefined) await tokenizer.loadInline();
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

    const tokenCount = tokenizer?.count;
    const countText = (text: string) =>
      text === ''
        ? Promise.resolve(0)
        : tokenCount
          ? tokenCount(text, exactChars)
          : Promise.resolve(estimateTokens(text));

    /**
     * What a success without usage used: the prompt's count plus the generated text of a whole
     * answer (usage wins when there is one).
     */
    async function spentBy(
      ctx: GatewayContext,
      json: Json,
      promptTokens: () => Promise<number>,
    ): Promise<number | undefined> {
      if (isObject(json.usage)) {
        countUsage(ctx, json.usage);
        const total = totalOf(json.usage);
        if (total !== undefined) return total;
      }
      return (await promptTokens()) + (await countText(generatedText(json)));
    }

    /** Settles a whole answer read after the response was written (by a later stage); never throws. */
    function settleLater(
      ctx: GatewayContext,
      r: Reservation,
      promptTokens: () => Promise<number>,
      keepEstimate: () => void,
      limit: number,
    ): void {
      ctx.res.once('close', () => {
        const answer = ctx.state.answer;
        const json = answer && answer.status < 400 ? answer.readJson : undefined;
        if (!isObject(json)) return keepEstimate(); // nobody could read it: the estimate stands
        void spentBy(ctx, json, promptTokens)
          .then((actual) => (actual === undefined ? undefined : settle(ctx, r, actual, limit)))
          .catch(() => undefined);
      });
    }

    /** The 429 for a reservation that did not fit (see the module comment). */
    function refusal(result: ReserveResult, estimate: Estimate, need: number, capping: boolean, limit: number) {
      // In debt (answers larger than reserved), the window after this one may still be full: the
      // wait covers every window until `need` fits.
      const windows = Math.max(0, Math.ceil((result.used + need - 2 * limit) / limit));
      const retryAfter = Math.max(1, Math.ceil((result.msLeft + windows * windowSeconds * 1000) / 1000));
      const debt = result.used > limit ? result.used - limit : 0;
      const owed = debt > 0 ? `; ${debt} tokens over the limit carried from answers larger than reserved` : '';
      let message: string;
      if (need > limit) {
        message = capping
          ? `Request too large: its prompt (${estimate.prompt} tokens) and at least ${minCompletion} completion tokens per choice need ${need} tokens, more than the limit of ${limit} per ${windowSeconds}s`
          : `Request too large: it may use ${need} tokens, more than the limit of ${limit} per ${windowSeconds}s`;
      } else if (capping) {
        message =
          `Token budget exhausted: ${result.remaining} of ${limit} tokens left in this ${windowSeconds}s window, and a request ` +
          `without max_tokens needs at least ${need} (its prompt and ${minCompletion} completion tokens per choice)${owed}`;
      } else {
        message = `Rate limit exceeded: ${limit} tokens per ${windowSeconds}s (requested ${need}, remaining ${result.remaining}${owed})`;
      }
      return new GatewayError('rate_limited', message, {
        code: 'tokens',
        details: {
          limit,
          window_seconds: windowSeconds,
          requested: need,
          remaining: result.remaining,
          ...(debt > 0 ? { debt } : {}),
          reset: result.resetAt,
        },
        extra: { retry_after_seconds: retryAfter },
        headers: { 'Retry-After': String(retryAfter), ...(sendHeaders ? tokenHeaders(result) : {}) },
      });
    }

    return {
      async handle(ctx, next) {
        const limit = limitFrom?.(ctx) ?? fallbackLimit;
        if (limit === undefined) return next();
        const body = await readJson(ctx);
        const kind = embeddingsPath.test(ctx.path) ? 'embeddings' : 'generation';
        const asked = requestTokens(body, { defaultCompletionTokens: defaultCompletion, kind });
        const key = clientKey(ctx);
        // No cap of its own: the cap is what is left after the prompt (at most the default), at
        // least the floor; reserved whole, so the answers of a window never exceed its budget.
        const capping = !asked.capped && capField !== 'none' && isObject(body);
        // A request that fits even at one token per byte of its prompt is admitted as an exact
        // count would admit it (with the same cap: its whole completion fits), without counting: it
        // reserves that bound, and its answer's usage settles it. One that may not fit is counted.
        let estimate: Estimate | undefined;
        let result: ReserveResult | undefined;
        let promptCounted = true;
        if (tokenCount && asked.text !== '') {
          const bound = estimateOf(asked, promptBound(asked));
          const roomy = await tokens.reserve(key, bound.total, limit);
          if (roomy.allowed) {
            estimate = bound;
            result = roomy;
            promptCounted = false;
          }
        }
        let need = 0;
        if (!estimate || !result) {
          estimate = estimateOf(asked, await countPrompt(asked, { count: tokenCount, exactChars }));
          need = capping ? estimate.prompt + estimate.choices * minCompletion : estimate.total;
          result = await tokens.reserve(key, estimate.total, limit, capping ? need : undefined);
        }
        decisions.inc({ decision: result.allowed ? 'allowed' : 'limited', store: result.store });
        if (sendHeaders) ctx.set(tokenHeaders(result));
        if (!result.allowed || !result.reservation) throw refusal(result, estimate, need, capping, limit);
        const reservation = result.reservation;
        // The prompt's count, for an answer without usage (the bound is not what it used).
        const counted = estimate.prompt;
        const promptTokens = promptCounted
          ? () => Promise.resolve(counted)
          : () => countPrompt(asked, { count: tokenCount, exactChars });
        // An answer that cannot say what it used keeps the reservation, its prompt counted.
        const completion = estimate.completion;
        const keepEstimate = () => {
          if (promptCounted) return;
          void promptTokens()
            .then((prompt) => settle(ctx, reservation, prompt + completion, limit))
            .catch(() => undefined);
        };

        if (capping && isObject(body)) {
          const cap = Math.floor((reservation.points - estimate.prompt) / estimate.choices);
          const field = Array.isArray(body.messages) ? capField : 'max_tokens';
          body[field] = cap;
          requestOf(ctx).setJson(body);
        }

        // Streams: ask the backend for usage when the client did not.
        let strip = false;
        if (askStreamUsage && isObject(body) && body.stream === true) {
          const so = body.stream_options;
          if (!(isObject(so) && so.include_usage === true)) {
            // Written out when the client sent none (most): in Node 20 a spread that adds a key
            // gives every object a hidden class of its own (docs/architecture.md, "Process tuning").
            body.stream_options = isObject(so) ? { ...so, include_usage: true } : { include_usage: true };
            requestOf(ctx).setJson(body);
            strip = true;
          }
        }

        let handle: StageAnswer | undefined;
        try {
          handle = (await next()) ?? undefined;
        } catch (err) {
          // A later stage refused (or the backend failed): what was generated, if an answer came.
          const answered = ctx.state.answer;
          if (!answered || answered.status >= 400) {
            // Refused before the backend answered, or the backend failed: nothing was generated.
            await settle(ctx, reservation, 0, limit);
          } else if (isObject(answered.readJson)) {
            // A whole answer a later stage read and refused (egress): the backend generated it.
            const actual = await spentBy(ctx, answered.readJson, promptTokens);
            if (actual !== undefined) await settle(ctx, reservation, actual, limit);
          } else if (!answered.isEventStream) {
            // Not read yet: a stage after the refusal may still read it.
            settleLater(ctx, reservation, promptTokens, keepEstimate, limit);
          } else keepEstimate();
          throw err;
        }

        // The answer, bound to this stage (the store itself when a test calls the stage with its own next).
        const answer = handle ?? answerOf(ctx);
        if (answer.status >= 400) {
          // An error answer (the backend's, or a later stage's): nothing was generated.
          await settle(ctx, reservation, 0, limit);
          return;
        }
        if (answer.isEventStream) {
          const filter = new UsageFilter(strip, exactChars);
          // An event that is not a chunk is not ours to refuse (the egress policy checks the
          // stream's wire format): it passes unread.
          answer.filterOpenAIChunks(filter, { invalid: 'skip' });
          // Settled once the answer has passed whole or will not (the client went away, an error
          // answered instead): with the usage, else with the prompt and the text that passed.
          answer.onEnd(() => {
            const usage = filter.usage;
            if (usage) countUsage(ctx, usage);
            const reported = usage ? totalOf(usage) : undefined;
            const actual =
              reported !== undefined
                ? Promise.resolve(reported)
                : Promise.all([promptTokens(), filter.text.tokens(tokenCount)]).then(([p, generated]) => p + generated);
            void actual.then((n) => settle(ctx, reservation, n, limit)).catch(() => undefined);
          });
          return;
        }
        if (!answer.hasBody || !/json/.test(answer.contentType)) return keepEstimate();
        // Read only what can be read whole (a failed read would consume the body): an answer of
        // unknown or too large a size, not read by a stage before, is settled once the response
        // is written, if a stage after this one read it (the egress policy reads every answer);
        // else it keeps the estimate.
        const declared = Number(answer.headers['content-length'] ?? Number.NaN);
        if (answer.readJson === undefined && !(declared <= ctx.state.limits.answerBytes)) {
          settleLater(ctx, reservation, promptTokens, keepEstimate, limit);
          return;
        }
        // An answer that cannot be read after all (cut short, undecodable): on_uninspectable decides.
        const json = await answer.json();
        if (!isObject(json)) return keepEstimate();
        const actual = await spentBy(ctx, json, promptTokens);
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
        min_completion_tokens: minCompletion,
        cap_field: capField,
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
