/**
 * Who opens and who may use an MCP client session (runtime SessionOwner).
 *
 * - With an authenticated caller (an auth, oauth-bearer, tenant or users stage before the proxy),
 *   the session is bound to its subject: the caller's id, with the issuer of an OAuth token (two
 *   issuers may use the same `sub`). Another subject's requests with the session id are answered
 *   404, as for an unknown session; so are requests without credentials. Its share of
 *   `max_sessions` is counted per subject.
 * - Without authentication nothing binds a session but its id (a random UUID, the only key the
 *   MCP transport defines). Binding it to the client address would break clients whose address
 *   changes under them: a carrier-grade NAT pool can give each connection of one client another
 *   public address, a phone moves between networks, a dual-stack client switches between IPv4 and
 *   IPv6. The share is counted per address then, an IPv6 address by its /64 (the block one host
 *   is normally given: counting each of its 2^64 addresses apart would give it no bound).
 */
import { isIPv6 } from 'node:net';
import type { GatewayContext } from './state.ts';
import type { SessionOwner } from './upstreams/types.ts';

export function sessionOwner(ctx: GatewayContext): SessionOwner {
  const subject = subjectOf(ctx);
  if (subject !== undefined) return { client: `subject:${subject}`, subject };
  return { client: `address:${addressKey(ctx.ip)}` };
}

/** The authenticated subject of the request, undefined without one. */
export function subjectOf(ctx: GatewayContext): string | undefined {
  const caller = ctx.state.caller;
  if (!caller?.authenticated) return undefined;
  const issuer = caller.attributes?.issuer;
  return JSON.stringify(typeof issuer === 'string' ? [caller.id, issuer] : [caller.id]);
}

/**
 * The address a client's sessions are counted by: an IPv4 address as it is (also when written
 * IPv4-mapped, `::ffff:a.b.c.d`), an IPv6 address as its /64 (`2001:db8:0:1::/64`).
 */
export function addressKey(ip: string): string {
  const address = ip.split('%')[0]?.toLowerCase() ?? '';
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(address);
  if (mapped) return mapped[1] as string;
  const groups = hextets(address);
  return groups ? `${groups.slice(0, 4).join(':')}::/64` : address;
}

/** The 8 groups of a valid IPv6 address, each without leading zeros. */
function hextets(address: string): string[] | undefined {
  let text = address;
  // A dotted IPv4 tail (::a.b.c.d, 64:ff9b::a.b.c.d) is two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split('::') as [string, string | undefined];
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...Array<string>(zeros).fill('0'), ...right];
  if (groups.length !== 8) return undefined;
  return groups.map((g) => Number.parseInt(g, 16).toString(16));
}
