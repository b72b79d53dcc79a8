/**
 * Which addresses the content fetcher may connect to. A fetched URL comes from outside (a search
 * result, a client), so private, loopback, link-local and other special-purpose addresses are
 * refused: otherwise the gateway could be made to read cloud metadata (169.254.169.254) or
 * internal services (SSRF). The operator allow-lists exceptions by CIDR (checked against the
 * resolved addresses) or by `host:port` (checked against the URL's host name and port).
 */
import { BlockList, isIP } from 'node:net';

/** IPv4 special-purpose ranges (RFC 6890 and successors) that are never fetched. */
const refusedV4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network", unspecified
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

/** IPv6 ranges never fetched; ranges that embed an IPv4 address are checked through it instead. */
const refusedV6: Array<[string, number]> = [
  ['::', 128], // unspecified
  ['::1', 128], // loopback
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];

const refused = new BlockList();
for (const [net, prefix] of refusedV4) refused.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of refusedV6) refused.addSubnet(net, prefix, 'ipv6');

/** The 16 bytes of an IPv6 address (`::`, and a trailing dotted IPv4 part, allowed). */
export function ipv6Bytes(address: string): number[] | undefined {
  let text = address.toLowerCase().replace(/%.*$/, '');
  const tail: number[] = [];
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    tail.push(...dotted.slice(1).map(Number));
    text = `${text.slice(0, dotted.index)}0:0`; // placeholder groups, replaced below
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (s: string) => (s === '' ? [] : s.split(':').map((g) => Number.parseInt(g, 16)));
  const head = groups(halves[0]);
  const rest = halves.length === 2 ? groups(halves[1]) : [];
  const fill = halves.length === 2 ? 8 - head.length - rest.length : 0;
  const all = [...head, ...new Array(Math.max(fill, 0)).fill(0), ...rest];
  if (all.length !== 8 || all.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return undefined;
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

/**
 * The IPv4 address an IPv6 address stands for, when it embeds one: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::/96) and 6to4 (2002:aabb:ccdd::/48). A connection
 * to these may end up at the IPv4 address, so that address is what is checked.
 */
export function embeddedIpv4(address: string): string | undefined {
  const b = ipv6Bytes(address);
  if (!b) return undefined;
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  const v4 = (at: number) => b.slice(at, at + 4).join('.');
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(12);
  if (zeros(0, 12) && !zeros(12, 14)) return v4(12); // ::a.b.c.d, but not :: or ::1
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return v4(12);
  if (b[0] === 0x20 && b[1] === 0x02) return v4(2);
  return undefined;
}

/** True for an address the fetcher never connects to unless allow-listed. */
export function isRefusedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return refused.check(address, 'ipv4');
  if (family !== 6) return true; // not an address at all: refuse rather than guess
  const v4 = embeddedIpv4(address);
  if (v4 !== undefined) return refused.check(v4, 'ipv4');
  return refused.check(address, 'ipv6');
}

export interface AddressPolicy {
  /** True when the URL's host name and port are allow-listed as a `host:port` entry. */
  allowsHost(hostname: string, port: number): boolean;
  /** True when the fetcher may connect to this resolved address. */
  allowsAddress(address: string): boolean;
  /** The allow-list entries, normalised, for describe(). */
  entries: string[];
}

/**
 * Builds the policy from allow-list entries: a CIDR (`10.1.0.0/16`, `fd00::/8`), a single address
 * (`127.0.0.1`, `::1`), or `host:port` (`localhost:8080`, `127.0.0.1:*`, `[::1]:9000`).
 * Throws on an entry it cannot read, so a typo fails the config instead of silently allowing
 * nothing.
 */
export function createAddressPolicy(allow: string[]): AddressPolicy {
  const cidrs = new BlockList();
  const hosts = new Set<string>();
  const entries: string[] = [];
  for (const raw of allow) {
    const entry = raw.trim();
    if (entry === '') continue;
    const slash = entry.indexOf('/');
    const bare = entry.replace(/^\[(.*)\]$/, '$1');
    if (slash !== -1 || isIP(bare)) {
      const net = slash === -1 ? bare : entry.slice(0, slash);
      const family = isIP(net);
      const prefix = slash === -1 ? (family === 4 ? 32 : 128) : Number(entry.slice(slash + 1));
      const max = family === 4 ? 32 : 128;
      if (!family || !Number.isInteger(prefix) || prefix < 0 || prefix > max) {
        throw new Error(`allow: "${raw}" is not a CIDR (a.b.c.d/n or x:y::/n)`);
      }
      cidrs.addSubnet(net, prefix, family === 4 ? 'ipv4' : 'ipv6');
      entries.push(`${net}/${prefix}`);
      continue;
    }
    const m = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5}|\*)$/.exec(entry);
    if (!m) throw new Error(`allow: "${raw}" is neither a CIDR nor host:port`);
    const host = canonicalHost(m[1]);
    if (!host) throw new Error(`allow: "${raw}" has an invalid host`);
    const key = `${host}:${m[2]}`;
    hosts.add(key);
    entries.push(key);
  }
  return {
    entries,
    allowsHost: (hostname, port) => hosts.has(`${hostname}:${port}`) || hosts.has(`${hostname}:*`),
    allowsAddress(address) {
      if (!isRefusedAddress(address)) return true;
      const family = isIP(address);
      if (family === 4) return cidrs.check(address, 'ipv4');
      const v4 = embeddedIpv4(address);
      return cidrs.check(address, 'ipv6') || (v4 !== undefined && cidrs.check(v4, 'ipv4'));
    },
  };
}

/** A host name as WHATWG URL writes it (lower case, IPv4 normalised, IPv6 bracketed). */
function canonicalHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}/`).hostname;
  } catch {
    return undefined;
  }
}
