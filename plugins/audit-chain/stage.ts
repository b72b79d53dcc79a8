/**
 * The `audit` stage: records the decisions of the request (`ctx.state.decisions`) in an
 * audit-chain resource, exactly once each, before the answer is acknowledged.
 *
 *   pipeline:
 *     - auth: {...}
 *     - audit: { chain: audit }      # before the stages that decide (`wraps`, checked at load)
 *     - policy: {...}
 *     - proxy: {...}
 *
 * It flushes after the rest of the pipeline (its answer phase included: put it before the stages
 * that decide), whether it answered or threw (a block is a thrown GatewayError: it is recorded,
 * then rethrown). When stages check a streamed answer as it passes, it watches the stream too, from
 * outside them: a decision they take is on record before the client sees what follows it. With
 * `record: all`, a request with no decision at all gets one `allow`.
 *
 * Which upstream served the answer is in every record of the request (`details.provider`, when a
 * proxy forwarded it), and a request that failed over (a provider of its list failed before another
 * answered, or all did) is always on record, as if `record: all` (its `allow` decisions too, or one
 * `allow` when it has none), with `details.failover`: the providers given up on and why.
 *
 * If an append fails, the stage throws a plain error, so the route's `on_error` decides:
 * fail-closed (default) answers 500 and no unaudited answer goes out; fail-open keeps the answer
 * the pipeline produced. A request that a later stage refused answers 500 in both cases (the
 * runtime cannot tell the two apart once a later stage has thrown).
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  type JsonSchema,
  jsonrpcWire,
  openaiWire,
  type PolicyDecision,
  type SseEvent,
  type SseFilter,
  type SseVerdict,
  type Stage,
  type StageAnswer,
  syncStage,
} from '../../runtime/index.ts';
import { type AuditChain, type AuditEntry, chainOption } from './api.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    chain: chainOption,
  },
} as const satisfies JsonSchema;

type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'audit',
  description: 'Record the decisions of each request in an audit-chain resource before it is answered',
  // Before the stages that decide, on every path: their decisions (answer phase included) are
  // taken inside this stage, so they are on record before the client sees the answer.
  wraps: ['policy', 'schema-validate'],
  options: optionsSchema,
  create(options, env) {
    const name = options.chain;
    const chain = env.resource<AuditChain>(name);
    /** The stage writing to `into`: the chain, or a dry run's list of records. */
    const stage = (into: (ctx: GatewayContext) => AuditChain): Stage =>
      // One `then` on next()'s promise, not an async frame and its awaits: most requests record
      // nothing (docs/performance.md, "Work per request").
      syncStage((ctx, next) => {
        const chain = into(ctx);
        return next().then(
          (answer) => recorded(ctx, chain, answer ?? undefined),
          async (err) => {
            await flush(ctx, chain, true);
            throw err;
          },
        );
      });
    /** The answer phase: what is on record once the stages behind it answered. */
    const recorded = (
      ctx: GatewayContext,
      chain: AuditChain,
      answer: StageAnswer | undefined,
    ): Promise<void> | undefined => {
      if (answer?.filtered) {
        // Stages deeper in the pipeline check the stream as it passes and may still decide: each
        // decision is on record before the client sees anything after it.
        const audited = () => answer.filterEvents(new AuditedStream(ctx, chain));
        if (ctx.state.decisions?.some((d) => d.action !== 'allow')) return flush(ctx, chain, false).then(audited);
        audited();
        return undefined;
      }
      if (recordsAll(ctx, chain) || recorders.has(ctx) || ctx.state.decisions?.some((d) => d.action !== 'allow')) {
        return flush(ctx, chain, true);
      }
      return undefined;
    };
    return {
      handle: stage(() => chain),
      // A dry run (runtime/dry-run.ts): the same records, kept on the dry run instead of appended.
      dryRun: stage((ctx) => dryRunChain(chain, ctx)),
      describe: () => ({ chain: name, record: chain.settings.record, store_prompt: chain.settings.store_prompt }),
    };
  },
});

/** A chain that keeps what would be appended on the request's dry run. */
function dryRunChain(chain: AuditChain, ctx: GatewayContext): AuditChain {
  const records = ctx.state.dryRun?.records ?? [];
  return {
    settings: chain.settings,
    async appendAll(entries) {
      records.push(...entries.map((e) => structuredClone(e)));
      return [];
    },
    append: () => Promise.reject(new Error('not in a dry run')),
    query: () => Promise.reject(new Error('not in a dry run')),
    verify: () => Promise.reject(new Error('not in a dry run')),
  };
}

/**
 * Watches a checked stream from outside the stages that check it: when they recorded a decision,
 * the events that follow it (a block's ending included) wait until it is on record.
 */
class AuditedStream implements SseFilter {
  #seen: number;

  constructor(
    private readonly ctx: GatewayContext,
    private readonly chain: AuditChain,
  ) {
    this.#seen = ctx.state.decisions?.length ?? 0;
  }

  onEvent(event: SseEvent): SseVerdict | undefined | Promise<SseVerdict> {
    const decisions = this.ctx.state.decisions;
    if (decisions === undefined || decisions.length === this.#seen) return undefined;
    // Only decisions the chain keeps make the stream wait (an `allow` does not, unless record: all).
    let recordable = recordsAll(this.ctx, this.chain);
    for (let i = this.#seen; i < decisions.length && !recordable; i++) recordable = decisions[i].action !== 'allow';
    this.#seen = decisions.length;
    if (!recordable) return undefined;
    return flush(this.ctx, this.chain, false).then(() => ({ events: [event] }));
  }

  onEnd(): SseEvent[] | Promise<SseEvent[]> {
    const { ctx, chain } = this;
    if (!(recordsAll(ctx, chain) || recorders.has(ctx) || ctx.state.decisions?.some((d) => d.action !== 'allow'))) {
      return [];
    }
    return flush(ctx, chain, true).then(() => []);
  }
}

/** Every decision of this request is recorded: `record: all`, or the request failed over. */
function recordsAll(ctx: GatewayContext, chain: AuditChain): boolean {
  return chain.settings.record === 'all' || (ctx.state.providers?.failed.length ?? 0) > 0;
}

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
    const { store_prompt } = chain.settings;
    const all = recordsAll(ctx, chain);
    const decisions = ctx.state.decisions ?? [];
    const upto = decisions.length;
    const pending = decisions.slice(this.#recorded, upto).filter((d) => all || d.action !== 'allow');
    const entries = pending.map((d) => toEntry(ctx, d));
    const addAllow = final && all && upto === 0 && !this.#implicitAllow;
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
  // Which upstream answered, and those given up on before it (never a key or a URL: names only).
  const providers = ctx.state.providers;
  if (providers?.served !== undefined) details.provider ??= providers.served;
  if (providers && providers.failed.length > 0) details.failover ??= providers.failed.map((f) => ({ ...f }));
  if (d.detail !== undefined) details.message = d.detail;
  // A JSON-RPC / MCP exchange: what was asked, of which tool and SType, in which session.
  const rpc = ctx.state.rpc;
  if (rpc) {
    details.method ??= rpc.method;
    const tool = jsonrpcWire.toolCallOf(rpc)?.name;
    if (tool) details.tool ??= tool;
    if (ctx.state.stype?.id) details.stype ??= ctx.state.stype.id;
    // Attributed to a session only when the gateway issued it and it is live (ctx.state.mcpSession,
    // set by mcp-validate or the proxy): an id any client can claim is kept apart, as claimed.
    const session = ctx.state.mcpSession;
    const claimed = ctx.get('mcp-session-id');
    if (session) details.session ??= session;
    else if (claimed) details.claimed_session ??= claimed;
  }
  return {
    request_id: ctx.state.requestId,
    tenant: ctx.state.caller?.id,
    action: d.action,
    rule: d.rule,
    regulation: d.regulation,
    phase: d.phase,
    details,
  };
}
