/**
 * The long-document sources of the injection corpus (scripts/models/document-sources.ts) cut a
 * document into passages the way its comment says: whole paragraphs from a seeded one on, at most
 * 24 000 characters, the same passages for the same name, and a document is one group (one split).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DOCUMENT_SOURCES, passages } from '../../scripts/models/document-sources.ts';

const paragraph = fc.string({ minLength: 1, maxLength: 3000 }).map((p) => p.replace(/[\r\n]/g, ' ').trim() || 'x');

describe('document passages', () => {
  it('property: whole paragraphs in order, bounded, reproducible, one per ~6 000 characters', () => {
    fc.assert(
      fc.property(fc.array(paragraph, { minLength: 1, maxLength: 80 }), fc.string({ maxLength: 12 }), (paras, name) => {
        const document = paras.join('\r\n\r\n');
        const cut = passages(document, name);
        expect(passages(document, name)).toEqual(cut);
        const total = paras.reduce((n, p) => n + p.length, 0);
        expect(cut.length).toBe(Math.max(1, Math.round(total / 6000)));
        const joined = `\n\n${paras.join('\n\n')}\n\n`;
        for (const p of cut) {
          expect(p.length).toBeLessThanOrEqual(24_000);
          expect(p.length).toBeGreaterThan(0);
          // Starts at a paragraph; whole paragraphs unless cut at the maximum.
          expect(joined.includes(`\n\n${p}${p.length < 24_000 ? '\n\n' : ''}`)).toBe(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('every document source is pinned, and the held-out ones are evaluation only', () => {
    for (const s of DOCUMENT_SOURCES) {
      expect(s.files.length).toBeGreaterThan(0);
      for (const f of s.files) expect(f.sha256).toMatch(/^[0-9a-f]{64}$/);
      expect(s.commit).toMatch(/^[0-9a-f]{40}$/);
    }
    const evalOnly = DOCUMENT_SOURCES.filter((s) => s.evalOnly).map((s) => s.id);
    expect(evalOnly).toEqual(['doc-system-design-primer', 'doc-tinyshakespeare']);
  });
});
