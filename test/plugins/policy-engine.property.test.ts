/**
 * Property: the policy engine agrees with a plain reference reading of its documented semantics
 * on random policies over random classifier scores. Policies in order, rules in order, only the
 * phase's rules; within a policy the first allow/deny settles it; across policies the first deny
 * wins; otherwise redact > flag > allow. Evaluation never throws.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PolicySet } from '../../plugins/policy/engine.ts';
import { compilePolicy } from '../../plugins/policy/format.ts';

const classifiers = ['pii', 'secrets', 'prompt_injection'];
const actions = ['stop', 'block', 'deny', 'redact', 'flag', 'allow'] as const;
const normal: Record<string, string> = {
  stop: 'block',
  block: 'block',
  deny: 'block',
  redact: 'redact',
  flag: 'flag',
  allow: 'allow',
};

const rule = fc.record({
  classifier: fc.constantFrom(...classifiers),
  threshold: fc.double({ min: 0, max: 1, noNaN: true }),
  action: fc.constantFrom(...actions),
  phase: fc.constantFrom('ingress', 'egress'),
});
const policies = fc.array(fc.array(rule, { maxLength: 5 }), { minLength: 1, maxLength: 4 });
const scores = fc.record(Object.fromEntries(classifiers.map((c) => [c, fc.double({ min: 0, max: 1, noNaN: true })])));

type R = { classifier: string; threshold: number; action: string; phase: string };

function reference(docs: R[][], s: Record<string, number>, phase: string): { action: string; rule?: string } {
  const matches: Array<{ action: string; rule: string }> = [];
  let allowed: { action: string; rule: string } | undefined;
  for (const [p, rules] of docs.entries()) {
    for (const [i, r] of rules.entries()) {
      if (r.phase !== phase || !(s[r.classifier] >= r.threshold)) continue;
      const m = { action: normal[r.action], rule: `p${p}-r${i}` };
      matches.push(m);
      if (m.action === 'block') return m;
      if (m.action === 'allow') {
        allowed ??= m;
        break;
      }
    }
  }
  return (
    matches.find((m) => m.action === 'redact') ??
    matches.find((m) => m.action === 'flag') ??
    allowed ?? { action: 'allow' }
  );
}

describe('policy engine', () => {
  it('matches the reference semantics on random policies and scores', () => {
    fc.assert(
      fc.property(policies, scores, fc.constantFrom('ingress', 'egress'), (docs, s, phase) => {
        const compiled = docs.map((rules, p) =>
          compilePolicy(
            {
              name: `p${p}`,
              rules: rules.map((r, i) => ({
                id: `p${p}-r${i}`,
                phase: r.phase,
                when: { '>=': [{ var: `classifiers.${r.classifier}.score` }, r.threshold] },
                action: r.action,
              })),
            },
            'property',
          ),
        );
        const set = new PolicySet(compiled);
        const data = {
          classifiers: Object.fromEntries(
            Object.entries(s).map(([k, v]) => [k, { score: v, label: 'x', confidence: v }]),
          ),
        };
        const { decision, matches } = set.evaluate(set.names, data, phase);
        const expected = reference(docs, s, phase);
        expect(decision.action).toBe(expected.action);
        if (expected.rule) expect(decision.rule).toBe(expected.rule);
        for (const m of matches) {
          const [p, i] = m.rule.slice(1).split('-r').map(Number);
          expect(m.score).toBe(s[docs[p][i].classifier]);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('never throws on arbitrary data, whatever the rules read', () => {
    const set = new PolicySet([
      compilePolicy(
        {
          name: 'any',
          rules: [
            { id: 'a', when: { '>=': [{ var: 'classifiers.pii.score' }, 0.5] }, action: 'redact' },
            { id: 'b', when: { in: ['x', { var: 'body.messages.0.content' }] }, action: 'flag' },
            { id: 'c', when: { '==': [{ var: 'tenant' }, 'acme'] }, action: 'stop' },
          ],
        },
        'property',
      ),
    ]);
    fc.assert(
      fc.property(fc.anything(), (data) => {
        const { decision } = set.evaluate(set.names, data, 'ingress');
        expect(['allow', 'flag', 'redact', 'block']).toContain(decision.action);
      }),
      { numRuns: 500 },
    );
  });
});

describe('scopes on a rule (what would lift a block: an oauth-bearer stage puts them in its challenge)', () => {
  const doc = (scopes: unknown) => ({
    name: 'scoped',
    rules: [{ id: 'need-write', when: { '==': [{ var: 'tool' }, 'w'] }, action: 'deny', scopes }],
  });

  it('a block names them in its decision; another tool, nothing', () => {
    const set = new PolicySet([compilePolicy(doc(['mcp:tools:write']), 'test')]);
    expect(set.evaluate(set.names, { tool: 'w' }, 'ingress').decision.details).toMatchObject({
      required_scopes: ['mcp:tools:write'],
    });
    expect(set.evaluate(set.names, { tool: 'r' }, 'ingress').decision.details?.required_scopes).toBeUndefined();
  });

  it('property: only RFC 6749 scope tokens are accepted (nothing that could break out of the header)', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 12 }), (scope) => {
        const valid = /^[\x21\x23-\x5B\x5D-\x7E]+$/.test(scope);
        const load = () => compilePolicy(doc([scope]), 'test');
        if (valid) expect(load).not.toThrow();
        else expect(load).toThrow(/scopes/);
      }),
      { numRuns: 300, examples: [['a"b'], ['a b'], ['a\\b'], ['mcp:tools\r\nX: y']] },
    );
    expect(() => compilePolicy(doc([]), 'test')).toThrow(/scopes/);
  });
});
