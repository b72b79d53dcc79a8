/**
 * Who an MCP session's share is counted by without credentials: the client address, an IPv6
 * address by its /64 (one host's block; each of its addresses apart would give it no bound).
 */
import { describe, expect, it } from 'vitest';
import type { GatewayContext } from '../../runtime/index.ts';
import { addressKey, sessionOwner } from '../../runtime/session-owner.ts';

const ctx = (ip: string, caller?: GatewayContext['state']['caller']) =>
  ({ ip, state: { caller } }) as unknown as GatewayContext;

describe('addressKey', () => {
  it('an IPv4 address is itself, also written IPv4-mapped', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressKey('::FFFF:203.0.113.7')).toBe('203.0.113.7');
  });

  it('every address of one /64 is one client, however it is written', () => {
    const forms = [
      '2001:db8:0:1::1',
      '2001:0db8:0000:0001:0000:0000:0000:0001',
      '2001:db8:0:1:ffff:ffff:ffff:ffff',
      '2001:DB8:0:1:a:b:c:d',
      '2001:db8::1:1:2:3:4',
      '2001:db8:0:1::1%eth0',
      '2001:db8:0:1::192.0.2.1',
    ];
    for (const f of forms) expect(addressKey(f), f).toBe('2001:db8:0:1::/64');
  });

  it('another /64 is another client', () => {
    expect(addressKey('2001:db8:0:2::1')).toBe('2001:db8:0:2::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
    expect(addressKey('fe80::1')).toBe('fe80:0:0:0::/64');
  });

  it('what is not an address is kept as it is', () => {
    expect(addressKey('')).toBe('');
    expect(addressKey('not-an-ip')).toBe('not-an-ip');
  });
});

describe('sessionOwner', () => {
  it('an authenticated caller: its subject (with its issuer), whatever its address', () => {
    const alice = { id: 'alice', authenticated: true, attributes: { issuer: 'https://as.example' } };
    const one = sessionOwner(ctx('198.51.100.1', alice));
    expect(one).toEqual({ client: `subject:${one.subject}`, subject: JSON.stringify(['alice', 'https://as.example']) });
    expect(sessionOwner(ctx('198.51.100.2', alice))).toEqual(one);
    // The same `sub` from another issuer is someone else.
    const other = sessionOwner(ctx('198.51.100.1', { ...alice, attributes: { issuer: 'https://other.example' } }));
    expect(other.subject).not.toBe(one.subject);
    // A static token's name: no issuer.
    expect(sessionOwner(ctx('198.51.100.1', { id: 'ci', authenticated: true })).subject).toBe('["ci"]');
  });

  it('without authentication: bound to nothing, counted by address', () => {
    expect(sessionOwner(ctx('198.51.100.1'))).toEqual({ client: 'address:198.51.100.1' });
    expect(sessionOwner(ctx('2001:db8::5', { id: '2001:db8::5', authenticated: false }))).toEqual({
      client: 'address:2001:db8:0:0::/64',
    });
  });
});
