/** URLs as the fetcher writes them in errors and callers write them in logs: no secrets. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { loggableUrl } from '../../plugins/content-fetcher/api.ts';

describe('loggableUrl', () => {
  it('keeps scheme, host, port and path; drops query, fragment and credentials', () => {
    expect(loggableUrl('https://user:pw@example.com:8443/a/b?access_token=s3cret&x=1#frag')).toBe(
      'https://example.com:8443/a/b',
    );
  });

  it('never lets a secret of the query, fragment or userinfo through, URL or not', () => {
    const secret = fc.stringMatching(/^[A-Za-z0-9]{8,16}$/).map((s) => `SECRET${s}`);
    fc.assert(
      fc.property(
        fc.webUrl({ withQueryParameters: true, withFragments: true }),
        secret,
        fc.constantFrom('query', 'fragment', 'userinfo', 'garbage'),
        (url, token, where) => {
          const u = new URL(url);
          let input: string;
          if (where === 'query') input = `${u.origin}${u.pathname}?access_token=${token}`;
          else if (where === 'fragment') input = `${u.origin}${u.pathname}#${token}`;
          else if (where === 'userinfo') input = `${u.protocol}//me:${token}@${u.host}${u.pathname}`;
          else input = `not a url ?access_token=${token}`;
          expect(loggableUrl(input)).not.toContain(token);
        },
      ),
    );
  });
});
