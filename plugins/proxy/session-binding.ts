/**
 * MCP sessions that an HTTP upstream issues (its `Mcp-Session-Id`, which the proxy passes through)
 * bound to the subject that opened them, as the gateway's own stdio sessions are (rpc.ts): the id
 * a client sees is the upstream's id and a MAC of (subject, id) under the deployment's secret
 * (`SWITCHYARD_SESSION_TAG_SECRET`, session-tags.ts). A request whose id does not carry the MAC
 * of its own subject is answered 404, as an unknown session, before anything is forwarded: with
 * OAuth on, Bob's token and Alice's session id reach nothing. Without authentication the subject
 * is empty and the id is only checked for having been issued through this gateway.
 *
 * Why a MAC and not a table: the ids stay valid across the processes of a deployment (a cluster's
 * workers, several gateways behind a load balancer) with no shared state, as the upstream's own
 * ids do; the cost is 17 characters and an HMAC per request that carries a session.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { type GatewayContext, GatewayError, sessionTagSecret, subjectOf } from '../../runtime/index.ts';

/** Hex digits of the MAC (64 bits: a forgery is a 2^-64 guess per request). */
const macChars = 16;
const header = 'mcp-session-id';

export class SessionBinding {
  readonly #key: Buffer;

  constructor(secret = sessionTagSecret().secret) {
    // A key of its own, derived from the deployment's secret (which also keys endpoint tags).
    this.#key = createHmac('sha256', secret).update('switchyard mcp session owner').digest();
  }

  /** The id a client sees for the upstream's session `id`, opened by `subject`. */
  bind(id: string, subject: string | undefined): string {
    return `${id}.${this.#mac(id, subject)}`;
  }

  /** The upstream's id of a session id the client sent; undefined unless bound to this subject. */
  unbind(shown: string, subject: string | undefined): string | undefined {
    const dot = shown.length - macChars - 1;
    if (dot < 1 || shown[dot] !== '.') return undefined;
    const id = shown.slice(0, dot);
    const given = Buffer.from(shown.slice(dot + 1));
    const expected = Buffer.from(this.#mac(id, subject));
    return given.length === expected.length && timingSafeEqual(given, expected) ? id : undefined;
  }

  /**
   * The request's session header as the upstream issued it, in `headers` (the headers going
   * upstream); a session id not bound to the caller is refused 404.
   */
  forward(ctx: GatewayContext, headers: Record<string, string | string[]>): void {
    const shown = headers[header];
    if (shown === undefined) return;
    const id = typeof shown === 'string' ? this.unbind(shown, subjectOf(ctx)) : undefined;
    if (id === undefined) throw unknownSession();
    headers[header] = id;
  }

  /** The answer's session header (a new session) as the client sees it: bound to the caller. */
  answer(ctx: GatewayContext, headers: Record<string, string | string[] | undefined>): void {
    const issued = headers[header];
    if (typeof issued === 'string' && issued !== '') headers[header] = this.bind(issued, subjectOf(ctx));
  }

  #mac(id: string, subject: string | undefined): string {
    return createHmac('sha256', this.#key)
      .update(subject ?? '')
      .update('\0')
      .update(id)
      .digest('hex')
      .slice(0, macChars);
  }
}

/** The answer to a session id this gateway does not know for the caller (404, as the MCP transport says). */
export function unknownSession(): GatewayError {
  return new GatewayError('not_found', 'Unknown or expired MCP session: initialize a new one', {
    code: 'session_not_found',
    rpcCode: -32000,
  });
}
