/**
 * The Host/Origin rules as properties: any DNS name nobody listed is refused as Host (what a
 * rebinding page sends), whatever its port and case; loopback names and IP addresses are accepted
 * with any port; a foreign Origin is refused even with an accepted Host.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkHostAndOrigin } from '../../runtime/server/host-check.ts';

const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,20}[a-z0-9]$/);
const dnsName = fc
  .array(label, { minLength: 2, maxLength: 4 })
  .map((parts) => parts.join('.'))
  .filter((n) => n !== 'localhost' && !/^[0-9.]+$/.test(n));
const port = fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined });
const withPort = (name: string, p: number | undefined) => (p === undefined ? name : `${name}:${p}`);
const upperSome = (s: string, mask: number) =>
  [...s].map((c, i) => ((mask >> (i % 31)) & 1 ? c.toUpperCase() : c)).join('');

describe('host-check', () => {
  it('refuses any unlisted DNS name as Host, in any case and with any port', () => {
    fc.assert(
      fc.property(dnsName, port, fc.integer({ min: 0 }), (name, p, mask) => {
        expect(() => checkHostAndOrigin({ host: withPort(upperSome(name, mask), p) })).toThrow(/not allowed/);
        // ...and accepts it once listed.
        checkHostAndOrigin({ host: withPort(upperSome(name, mask), p) }, { allow: [name], origins: [] });
      }),
    );
  });

  it('accepts loopback names and IP addresses with any port', () => {
    const ipv4 = fc.tuple(...Array.from({ length: 4 }, () => fc.integer({ min: 0, max: 255 }))).map((o) => o.join('.'));
    const accepted = fc.oneof(fc.constantFrom('localhost', '127.0.0.1', '[::1]', '[2001:db8::1]'), ipv4);
    fc.assert(
      fc.property(accepted, port, (name, p) => {
        checkHostAndOrigin({ host: withPort(name, p) });
      }),
    );
  });

  it('refuses a foreign Origin with a loopback Host, accepts its own origin and loopback pages', () => {
    fc.assert(
      fc.property(dnsName, port, fc.constantFrom('http', 'https'), (name, p, scheme) => {
        const host = withPort('127.0.0.1', p);
        expect(() => checkHostAndOrigin({ host, origin: `${scheme}://${withPort(name, p)}` })).toThrow(/Origin/);
        checkHostAndOrigin({ host, origin: `http://${host}` });
        checkHostAndOrigin({ host, origin: `${scheme}://${withPort('localhost', p)}` });
        checkHostAndOrigin(
          { host, origin: `${scheme}://${withPort(name, p)}` },
          { allow: [], origins: [`${scheme}://${withPort(name, p)}`] },
        );
      }),
    );
  });
});
