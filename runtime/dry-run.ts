/**
 * Dry runs: a request that goes through a route's real pipeline — the request core, the same
 * stages with the same options, the answer phase and its stream filters — without side effects
 * outside the request. An operator endpoint (e.g. `POST /admin/test-policy`) asks "what would this
 * request get?" and gets the answer of the code path a real request takes, not of a copy of it.
 *
 * The request is injected in process (light-my-request): it never crosses a socket, so nothing
 * from the network can pass for one. Each stage says what it does in a dry run:
 *
 *   - its plugin declares `dryRun: 'run'` (the stage has no effect outside the request: classify,
 *     policy, validation), or `'skip'` (a counter that a dry run must not move: rate limits);
 *   - or its instance gives a `dryRun` handler to run instead (the proxy answers with the answer
 *     the dry run brings instead of calling the upstream; an auth stage takes the identity the dry
 *     run names instead of a credential; the audit stage keeps the records it would write on the
 *     dry run instead of appending them).
 *
 * A route with a stage that declares neither cannot be dry-run (fail closed): the dry run is
 * refused naming the stage, rather than run with a side effect nobody asked for.
 */
import type { IncomingMessage } from 'node:http';
import { inject } from 'light-my-request';
import type { GatewayState } from './state.ts';

/** An upstream answer a dry run brings: the terminal stage answers with it instead of calling out. */
export interface DryRunAnswer {
  status: number;
  headers: Record<string, string>;
  /** The body as the upstream would send it (an event stream's text for `text/event-stream`). */
  body: string;
}

/** What a stage reported in a dry run (e.g. the policy stage: every rule that matched, the scores). */
export interface DryRunObservation {
  stage: string;
  [key: string]: unknown;
}

/** The dry run of one request, on its state (`ctx.state.dryRun`) while it runs. */
export interface DryRun {
  /**
   * Who the request is from: an identity the route's authentication stage resolves as it would a
   * credential (a tenant id). Undefined: no identity (the stage's anonymous default, `attributes`).
   */
  identity?: string;
  /** Caller attributes that replace the resolved ones (a what-if: another policy). */
  attributes?: Record<string, unknown>;
  /** The upstream's answer (see DryRunAnswer); without one the terminal stage answers 204. */
  answer?: DryRunAnswer;
  /** The records the audit stage would have written, in order. */
  records: unknown[];
  /** What stages reported (see DryRunObservation), in the order they ran. */
  observations: DryRunObservation[];
}

export interface DryRunRequest {
  method: string;
  /** Path and query, e.g. `/v1/chat/completions`. */
  path: string;
  headers?: Record<string, string>;
  body?: string;
  identity?: string;
  attributes?: Record<string, unknown>;
  answer?: DryRunAnswer;
}

export interface DryRunResult {
  status: number;
  /** Response headers, lower-case names. */
  headers: Record<string, string | string[]>;
  body: string;
  /** The request's state once its pipeline is done (decisions, classifications, caller...). */
  state: GatewayState | undefined;
  records: unknown[];
  observations: DryRunObservation[];
}

const dryRuns = new WeakMap<IncomingMessage, { run: DryRun; state?: GatewayState }>();

/** The dry run a request carries (undefined for every request from the network). */
export function dryRunOf(req: IncomingMessage): DryRun | undefined {
  return dryRuns.get(req)?.run;
}

/** Keeps the request's state for the caller of the dry run (the request core, when it is done). */
export function keepDryRunState(req: IncomingMessage, state: GatewayState): void {
  const entry = dryRuns.get(req);
  if (entry) entry.state = state;
}

type Dispatch = (req: IncomingMessage, res: import('node:http').ServerResponse) => void;

/** Runs `request` through `dispatch` (the main listener's request handler) as a dry run. */
export async function injectDryRun(dispatch: Dispatch, host: string, request: DryRunRequest): Promise<DryRunResult> {
  const run: DryRun = {
    identity: request.identity,
    attributes: request.attributes,
    answer: request.answer,
    records: [],
    observations: [],
  };
  let entry: { run: DryRun; state?: GatewayState } | undefined;
  const res = await inject(
    (req, response) => {
      entry = { run };
      dryRuns.set(req, entry);
      socketCalls(req.socket);
      if (response.socket) socketCalls(response.socket);
      dispatch(req, response);
    },
    {
      method: request.method as 'POST',
      url: request.path,
      headers: { host, ...request.headers },
      payload: request.body,
      remoteAddress: '127.0.0.1',
    },
  );
  return {
    status: res.statusCode,
    headers: stringHeaders(res.headers),
    body: res.payload,
    state: entry?.state,
    records: run.records,
    observations: run.observations,
  };
}

/**
 * The injected request's socket is a stand-in with no connection: what the request core and the
 * answer writer call on a real one (no timeout, no Nagle, cut on a late error) does nothing here.
 */
function socketCalls(socket: unknown): void {
  const s = socket as Record<string, unknown>;
  for (const name of ['setTimeout', 'setNoDelay', 'setKeepAlive', 'destroy', 'ref', 'unref']) {
    if (typeof s[name] !== 'function') s[name] = () => s;
  }
}

function stringHeaders(
  headers: Record<string, string | string[] | number | undefined>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const name in headers) {
    const value = headers[name];
    if (value !== undefined) out[name] = typeof value === 'number' ? String(value) : value;
  }
  return out;
}
