/**
 * The `audit` stage: records the decisions of the request (`ctx.state.decisions`) in an
 * audit-chain resource, exactly once each, before the answer is acknowledged.
 *
 *   pipeline:
 *     - auth: {...}
 *     - audit: { chain: audit }      # before the stages that decide
 *     - policy: {...}
 *     - proxy: {...}
 *
 * It installs `ctx.state.auditFlush` (for stages that decide after the response started, such as
 * a stream filter) and flushes once more after the rest of the pipeline, whether it answered or
 * threw (a block is a thrown GatewayError: it is recorded, then rethrown). A `deny` decision is
 * written as `block`. With `record: all`, a request with no decision at all gets one `allow`.
 *
 * If an append fails, the stage throws a plain error, so the route's `on_error` decides:
 * fail-closed (default) answers 500 and no unaudited answer goes out; fail-open keeps the answer
 * the pipeline produced. A request that a later stage refused answers 500 in both cases (the
 * runtime cannot tell the two apart once a later stage has thrown).
 */
import { definePlugin, type GatewayContext, openaiWire, type PolicyDecision } from '../../runtime/index.ts';
import type { AuditChain, AuditEntry } from './api.ts';

const actionNames: Record<string, string> = { deny: 'block' };

export default definePlugin<{ chain?: string }>({
  name: 'audit',
  description: 'Record the decisions of each request in an audit-chain resource before it is answered',
  options: {
    type: 'object',
    additionalProperties: false,
    properties: {
      chain: {
        type: 'string',
        minLength: 1,
        default: 'audit',
        'x-ref': 'resource',
        description: 'Name of the audit-chain resource',
      },
    },
  },
  create(options, env) {
    const name = options.chain ?? 'audit';
    const chain = env.resource<AuditChain>(name);
    return {
      async handle(ctx, next) {
        // A bound function, not a closure: nothing else is made for a plain allow (the recorder
        // comes on first need), and a closure per request would cost more (see docs/plugins.md).
        ctx.state.auditFlush = flush.bind(undefined, ctx, chain, false);
        try {
          await next();
        } catch (err) {
          await flush(ctx, chain, true);
          throw err;
        }
        if (
          recorders.has(ctx) ||
          chain.settings.record === 'all' ||
          ctx.state.decisions?.some((d) => d.action !== 'allow')
        ) {
          await flush(ctx, chain, true);
        }
      },
      describe: () => ({ chain: name, record: chain.settings.record, store_prompt: chain.settings.store_prompt }),
    };
  },
});

/** Per request (while it runs): what is on record so far, made on the first flush. */
const recorders = new WeakMap<GatewayContext, Recorder>();

/** Records the request's decisions not yet on record; `final` once the pipeline is done. */
function flush(ctx: GatewayContext, chain: AuditChain, final: boolean): Promise<void> {
  let recorder = recorders.get(ctx);
  if (!recorder) {
    recorder = new Recorder(ctx, chain);
    recorders.set(ctx, recorder);
  }
  return recorder.flush(final);
}

/**
 * Remembers how many decisions are on record, and runs flushes one after the other so that
 * concurrent calls (a stream filter and the stage itself) never record a decision twice.
 */
class Recorder {
  #recorded = 0;
  #implicitAllow = false;
  #tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly ctx: GatewayContext,
    private readonly chain: AuditChain,
  ) {}

  flush(final: boolean): Promise<void> {
    const run = this.#tail.then(() => this.#write(final));
    this.#tail = run.catch(() => {});
    return run;
  }

  async #write(final: boolean): Promise<void> {
    const { ctx, chain } = this;
    const { record, store_prompt } = chain.settings;
    const decisions = ctx.state.decisions ?? [];
    const upto = decisions.length;
    const pending = decisions.slice(this.#recorded, upto).filter((d) => record === 'all' || d.action !== 'allow');
    const entries = pending.map((d) => toEntry(ctx, d));
    const addAllow = final && record === 'all' && upto === 0 && !this.#implicitAllow;
    if (addAllow) entries.push(toEntry(ctx, { action: 'allow' }));
    if (entries.length > 0) {
      if (store_prompt) {
        // What the classifiers read (every field a model reads), as the pipeline left it.
        const prompt = openaiWire.requestText(ctx.state.json);
        if (prompt !== '') for (const e of entries) e.details = { ...e.details, prompt };
      }
      try {
        await chain.appendAll(entries);
      } catch (err) {
        throw new Error('audit record could not be written', { cause: err });
      }
    }
    this.#recorded = upto;
    if (addAllow) this.#implicitAllow = true;
  }
}

function toEntry(ctx: GatewayContext, d: PolicyDecision): AuditEntry & { details: Record<string, unknown> } {
  const details: Record<string, unknown> = { ...d.details };
  if (d.policy !== undefined) details.policy = d.policy;
  if (d.detail !== undefined) details.message = d.detail;
  return {
    request_id: ctx.state.requestId,
    tenant: ctx.state.caller?.id,
    action: actionNames[d.action] ?? d.action,
    rule: d.rule,
    regulation: d.regulation,
    phase: d.phase,
    details,
  };
}
