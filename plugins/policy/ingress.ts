/**
 * The request phase of a policy stage: the rules of its phase on the request (a block refused in
 * strict mode, annotated in permissive, counted in audit; a redact masks the request's text), and
 * for a `tools/list` the listing's tools inspected (`tools` rules) and those a caller may never call
 * hidden (strict mode).
 */
import {
  answerOf,
  type GatewayContext,
  jsonrpcWire,
  mapRpcResponses,
  type Next,
  openaiWire,
  type PolicyDecision,
  type RpcResponseMap,
  requestOf,
  UninspectableAnswer,
} from '../../runtime/index.ts';
import { asToolCall, evaluationData, evidenceOf, isObject, scoresOf } from './data.ts';
import { blocksEveryCall } from './engine.ts';
import { addLatency, type PolicyShared, type Results } from './shared.ts';

/** The request-phase handler of a policy stage. */
export function ingressPhase(s: PolicyShared): (ctx: GatewayContext, next: Next) => Promise<void> {
  const {
    options,
    registry,
    store,
    classifierSet,
    log,
    applicable,
    count,
    record,
    blockError,
    maskWith,
    mode,
    observe,
  } = s;
  /**
   * Hides from a `tools/list` answer the tools this caller could never call: those a block rule
   * refuses whatever the arguments (a rule that reads the arguments leaves the tool listed, and
   * the call is checked when it comes). Made once; the request comes as `ctx`.
   */
  const filterListing: RpcResponseMap = (response, ctx) => {
    const result = response.result;
    if (!isObject(result) || !Array.isArray(result.tools)) return response;
    const current = store.current;
    const base = evaluationData(ctx, 'strict', options.phase);
    const hidden: string[] = [];
    const tools = result.tools.filter((tool) => {
      if (!isObject(tool) || typeof tool.name !== 'string') return true;
      const id = registry?.idForTool(tool.name);
      const record = id ? registry?.get(id) : undefined;
      const data = asToolCall(base, tool.name, record?.id ?? null, record?.status ?? null);
      const names = applicable(current, record?.id ?? null, ctx);
      const blocked = blocksEveryCall(current, names, data, options.phase) !== undefined;
      if (blocked) hidden.push(tool.name);
      return !blocked;
    });
    if (hidden.length === 0) return response;
    ctx.state.annotations.policy_hidden_tools = hidden;
    return { ...response, result: { ...result, tools } };
  };

  /**
   * Tools withheld from a listing (strict mode), by name, with the decision: a call naming one
   * is refused until a listing shows it clean again. Bounded (a listing is of one upstream).
   */
  const withheld = new Map<string, PolicyDecision>();
  const maxWithheld = 10_000;

  /**
   * The `tools` phase: each tool a `tools/list` answer defines is classified (its name,
   * description and schemas' text, jsonrpcWire.toolDefinitionText) and the `tools` rules
   * evaluated on it. In strict mode a block withholds the tool from the listing; a flag (and a
   * block in permissive mode) marks it in `annotations.tools_flagged`. One decision is recorded
   * for the listing: the most severe, with the tools it concerns.
   */
  const inspectListing: RpcResponseMap = async (response, ctx) => {
    const result = response.result;
    if (!isObject(result) || !Array.isArray(result.tools)) return response;
    if (!classifierSet) throw new Error('`phase: tools` rules need `classifiers` on the policy stage');
    const started = performance.now();
    const m = mode(ctx);
    const current = store.current;
    const names = applicable(current, ctx.state.stype?.id ?? null, ctx);
    const base = evaluationData(ctx, m, 'tools');
    const tools: unknown[] = result.tools;
    // Each definition's text first (a bounded walk, cheap next to classifying it); one too large
    // to classify within the loop budget is not read in part (an instruction after the cut would
    // pass): the listing is refused as uninspectable (502, audited; on_uninspectable: pass opts in).
    const texts = tools.map((tool) =>
      isObject(tool) && typeof tool.name === 'string' ? jsonrpcWire.toolDefinitionText(tool) : undefined,
    );
    const largest = texts.reduce((max, t) => Math.max(max, t?.length ?? 0), 0);
    if (largest > MAX_TOOL_DEFINITION_CHARS) {
      throw new UninspectableAnswer(
        'too_large',
        `a tool definition in the tools/list answer has ${largest} characters of text, over ${MAX_TOOL_DEFINITION_CHARS}`,
      );
    }
    const inspect = async (i: number) => {
      const tool = tools[i] as { name: string };
      const text = texts[i];
      if (text === undefined) return undefined;
      const results = text === '' ? {} : await classifierSet.classify(undefined, text);
      const evaluation = current.evaluate(names, { ...base, tool: tool.name, classifiers: scoresOf(results) }, 'tools');
      // Written out: a spread that adds a key makes a hidden class per object on Node 20
      // (docs/architecture.md, "Process tuning"), here one per tool of every listing.
      return { decision: evaluation.decision, matches: evaluation.matches, evidence: evidenceOf(results) };
    };
    // In slices of about LISTING_SLICE_CHARS of definition text, the event loop served between
    // them: a listing of megabytes (an upstream's to choose) must not hold every other request.
    const evaluations: Array<Awaited<ReturnType<typeof inspect>>> = [];
    for (let from = 0; from < tools.length; ) {
      let to = from;
      for (let chars = 0; to < tools.length && (to === from || chars < LISTING_SLICE_CHARS); to++) {
        chars += texts[to]?.length ?? 0;
      }
      const slice = Array.from({ length: to - from }, (_, k) => inspect(from + k));
      evaluations.push(...(await Promise.all(slice)));
      from = to;
      if (from < tools.length) await new Promise((r) => setImmediate(r));
    }
    const kept: unknown[] = [];
    const stripped: string[] = [];
    const flagged: Array<{ tool: string; policy?: string; rule?: string; detail?: string }> = [];
    /** What the withheld or flagged tools hid from a human reader, decoded (ClassifierResult.evidence). */
    const hidden: Record<string, string[]> = {};
    let worst: PolicyDecision | undefined;
    for (let i = 0; i < tools.length; i++) {
      const evaluation = evaluations[i];
      const name = (tools[i] as { name?: unknown }).name as string;
      if (!evaluation) {
        kept.push(tools[i]);
        continue;
      }
      if (evaluation.decision.action !== 'allow' && evaluation.evidence) hidden[name] = evaluation.evidence;
      count(evaluation.matches);
      const d = evaluation.decision;
      if (d.action === 'block' && m === 'strict') {
        stripped.push(name);
        if (withheld.size < maxWithheld || withheld.has(name)) withheld.set(name, d);
      } else {
        withheld.delete(name);
        kept.push(tools[i]);
        if (d.action === 'block' || d.action === 'flag') {
          flagged.push({ tool: name, policy: d.policy, rule: d.rule, detail: d.detail });
        }
      }
      if (d.action !== 'allow' && (!worst || (worst.action === 'flag' && d.action === 'block'))) worst = d;
    }
    if (stripped.length > 0) ctx.state.annotations.tools_withheld = stripped;
    if (flagged.length > 0 && m !== 'audit') ctx.state.annotations.tools_flagged = flagged;
    const concerned = [...stripped, ...flagged.map((f) => f.tool)];
    record(
      ctx,
      worst
        ? {
            ...worst,
            details: {
              ...worst.details,
              tools: concerned,
              withheld: stripped.length > 0,
              ...(Object.keys(hidden).length > 0 ? { hidden } : {}),
            },
          }
        : { action: 'allow', phase: 'tools' },
    );
    addLatency(ctx, started);
    return stripped.length > 0 ? { ...response, result: { ...result, tools: kept } } : response;
  };

  /** The request's check; a throw is a rejection (an async stage's contract), without an async frame. */
  function ingress(ctx: GatewayContext, next: Next): Promise<void> {
    try {
      return checkRequest(ctx, next);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  function checkRequest(ctx: GatewayContext, next: Next): Promise<void> {
    const started = performance.now();
    const m = mode(ctx);
    const current = store.current;
    const data = evaluationData(ctx, m, options.phase);
    const names = applicable(current, data.stype, ctx);
    // A tool withheld from a listing is not callable by its name either (strict mode).
    const refused = data.method === 'tools/call' && m === 'strict' ? withheld.get(data.tool ?? '') : undefined;
    if (refused) {
      record(ctx, refused);
      addLatency(ctx, started);
      throw blockError(refused);
    }
    const { decision, matches } = current.evaluate(names, data, options.phase);
    if (ctx.state.dryRun) observe(ctx, options.phase, names, matches, ctx.state.classifications as Results, m);
    count(matches);
    record(ctx, decision);
    const flags = matches.filter((x) => x.action === 'flag');
    if (flags.length > 0 && m !== 'audit') {
      ctx.state.annotations.policy_flags = flags.map((x) => ({ policy: x.policy, rule: x.rule, detail: x.detail }));
    }
    if (decision.action === 'block') {
      if (m === 'strict') {
        addLatency(ctx, started);
        throw blockError(decision);
      }
      if (m === 'permissive') {
        ctx.state.annotations.policy_violation = {
          policy: decision.policy,
          rule: decision.rule,
          detail: decision.detail,
        };
        log.warn(
          {
            request_id: ctx.state.requestId,
            policy: decision.policy,
            rule: decision.rule,
            method: data.method,
            tool: data.tool,
          },
          'policy denied the request; forwarded (permissive)',
        );
      }
    }
    const json = ctx.state.json;
    const listing = data.method === 'tools/list';
    if (decision.action === 'redact' && m !== 'audit' && isObject(json)) {
      // Masked in place: the request view sends it re-serialised.
      return openaiWire
        .maskRequest(json, (text) => maskWith(matches, text))
        .then((masked) => {
          if (masked) requestOf(ctx).setJson(json);
          return passOn(ctx, next, started, listing, listing && current.hasPhase(names, 'tools'), m);
        });
    }
    return passOn(ctx, next, started, listing, listing && current.hasPhase(names, 'tools'), m);
  }

  /** The request goes on; a listing's answer is inspected (`inspect`) or filtered (strict mode) when it comes. */
  function passOn(
    ctx: GatewayContext,
    next: Next,
    started: number,
    listing: boolean,
    inspect: boolean,
    m: string,
  ): Promise<void> {
    addLatency(ctx, started);
    const filter = options.filter_list && m === 'strict' && listing;
    if (!filter && !inspect) return next();
    return next().then(async (handle) => {
      // This stage's answer handle (the store itself when a test passes a next of its own).
      const answer = handle ?? answerOf(ctx);
      if (inspect) await mapRpcResponses(ctx, inspectListing, answer);
      if (filter) await mapRpcResponses(ctx, filterListing, answer);
    });
  }

  return ingress;
}

/** Definition text classified per turn of the event loop when a tools/list answer is inspected. */
const LISTING_SLICE_CHARS = 64 * 1024;
/**
 * The most text one tool definition may have to be inspected (classifying it is one piece of
 * work, ~10-40 ms per MiB for the Tier A patterns); real definitions are a few KiB.
 */
const MAX_TOOL_DEFINITION_CHARS = 1024 * 1024;
