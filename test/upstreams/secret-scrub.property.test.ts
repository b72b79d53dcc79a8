/**
 * The scrubbing of a provider's key from its answers (runtime/upstreams/secret-scrub.ts), over any
 * body and any way it is cut into chunks: the output is the body with every occurrence of the key
 * (and its JSON-escaped form) replaced by a marker of the same length; nothing else changes; and
 * what is held back after a chunk is never more than a proper prefix of the key (an answer's last
 * bytes go out at once unless they could begin it).
 */
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { redactionMarker, SecretScrubber } from '../../runtime/upstreams/secret-scrub.ts';

const keys = fc.oneof(
  fc.stringMatching(/^[0-9a-f]{32}$/),
  fc.stringMatching(/^sk-[A-Za-z0-9/+]{20,48}$/),
  fc.constantFrom('aaaaaaaaaaaa', 'abab/abab/ab'),
);

/** A body of filler and key pieces: whole keys, halves, prefixes that stop short. */
function bodyOf(key: string) {
  const piece = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constant(key),
    fc.constant(key.replaceAll('/', '\\/')),
    fc.integer({ min: 1, max: key.length - 1 }).map((n) => key.slice(0, n)),
  );
  return fc.array(piece, { maxLength: 12 }).map((parts) => parts.join(''));
}

function expected(body: string, key: string): string {
  const escaped = key.replaceAll('/', '\\/');
  let out = body.replaceAll(key, redactionMarker(key.length));
  if (escaped !== key) out = out.replaceAll(escaped, redactionMarker(escaped.length));
  return out;
}

async function scrubbed(scrubber: SecretScrubber, chunks: Buffer[]): Promise<{ out: Buffer; emitted: number[] }> {
  const source = new PassThrough();
  const { body } = scrubber.answer({ status: 200, headers: {}, body: source }, 'p');
  const parts: Buffer[] = [];
  const emitted: number[] = [];
  body.on('data', (c: Buffer) => parts.push(c));
  for (const c of chunks) {
    source.write(c);
    await new Promise((r) => setImmediate(r));
    emitted.push(parts.reduce((n, p) => n + p.length, 0));
  }
  source.end();
  await new Promise((r) => body.once('end', r));
  return { out: Buffer.concat(parts), emitted };
}

describe('SecretScrubber', () => {
  it('replaces every occurrence, whatever the chunking, and holds back at most a proper prefix of the key', async () => {
    await fc.assert(
      fc.asyncProperty(
        keys.chain((key) => fc.tuple(fc.constant(key), bodyOf(key), fc.array(fc.nat(), { maxLength: 8 }))),
        async ([key, body, cuts]) => {
          const bytes = Buffer.from(body, 'utf8');
          const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
          const chunks = [0, ...at, bytes.length]
            .slice(1)
            .map((end, i, ends) => bytes.subarray(i === 0 ? 0 : ends[i - 1], end))
            .filter((c) => c.length > 0);
          const { out, emitted } = await scrubbed(new SecretScrubber(key), chunks);
          expect(out.toString('utf8')).toBe(expected(body, key));
          expect(out.length).toBe(bytes.length);
          let received = 0;
          chunks.forEach((c, i) => {
            received += c.length;
            expect(received - (emitted[i] as number)).toBeLessThan(Buffer.byteLength(key.replaceAll('/', '\\/')));
          });
        },
      ),
      { seed: 29, numRuns: 300 },
    );
  });

  it('an event stream chunk that cannot begin the key is passed on whole at once', async () => {
    const key = 'f'.repeat(32);
    const event = Buffer.from('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n');
    const { emitted } = await scrubbed(new SecretScrubber(key), [event, event]);
    expect(emitted).toEqual([event.length, 2 * event.length]);
  });

  it('scrubs header values, arrays included, and leaves other headers as they were', () => {
    const key = '0123456789abcdef0123456789abcdef';
    const s = new SecretScrubber(key);
    const headers = {
      'x-auth': `Bearer ${key}`,
      'set-cookie': ['a=1', `k=${key}`],
      'content-type': 'application/json',
    };
    expect(s.headers(headers)).toEqual({
      'x-auth': `Bearer ${redactionMarker(32)}`,
      'set-cookie': ['a=1', `k=${redactionMarker(32)}`],
      'content-type': 'application/json',
    });
    expect(redactionMarker(32)).toHaveLength(32);
  });
});
