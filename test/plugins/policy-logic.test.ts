/**
 * Policy conditions are compiled to closures for speed; this property test holds the compiled
 * form to json-logic-js's interpreter on random rules and random data, so that a rule means the
 * same whichever runs it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { evaluateCompiled, interpret } from '../../plugins/policy/logic.ts';

const keys = ['a', 'b', 'tool', 'x'];
const scalar = fc.oneof(
  fc.integer({ min: -3, max: 3 }),
  fc.constantFrom('', 'a', 'b', 'get-env', '1', '0', 'true'),
  fc.boolean(),
  fc.constant(null),
);
const data = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, scalar, scalar, fc.array(tie('value'), { maxLength: 3 }), tie('object')),
  object: fc.dictionary(fc.constantFrom(...keys, '0'), tie('value'), { maxKeys: 4 }),
})).object;

const path = fc.constantFrom('a', 'b', 'tool', 'x', 'a.b', 'x.0', 'a.length', '', 'missing.deep');
const rule = fc.letrec((tie) => {
  const r = tie('rule');
  const two = (op: string) => fc.tuple(r, r).map(([x, y]) => ({ [op]: [x, y] }));
  return {
    rule: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      scalar,
      path.map((p) => ({ var: p })),
      fc.tuple(path, scalar).map(([p, d]) => ({ var: [p, d] })),
      r.map((x) => ({ var: x })),
      fc.constantFrom('==', '===', '!=', '!==', '>', '>=', '<', '<=', 'in', 'cat', '+', 'merge').chain(two),
      fc.tuple(r, r, r).map((xs) => ({ '==': xs })),
      fc.tuple(r, r, r).map(([x, y, z]) => ({ '<': [x, y, z] })),
      fc.tuple(r, r, r).map(([x, y, z]) => ({ '<=': [x, y, z] })),
      r.map((x) => ({ '!': x })),
      r.map((x) => ({ '!!': [x] })),
      fc.array(r, { maxLength: 3 }).map((xs) => ({ and: xs })),
      fc.array(r, { maxLength: 3 }).map((xs) => ({ or: xs })),
      fc.array(r, { maxLength: 5 }).map((xs) => ({ if: xs })),
      fc.tuple(r, r, r).map((xs) => ({ '?:': xs })),
      fc.tuple(r, fc.constantFrom('^get', 'a|b', '^$', '\\d'), fc.constantFrom('', 'i')).map(([x, p, f]) => ({
        matches: [x, p, f],
      })),
      fc.tuple(r, r).map(([x, y]) => ({ some: [x, y] })),
      fc.array(scalar, { maxLength: 3 }).map((xs) => ({ in: [{ var: 'tool' }, xs] })),
    ),
  };
}).rule;

function outcome(f: () => unknown): { value?: unknown; threw?: boolean } {
  try {
    return { value: f() };
  } catch {
    return { threw: true };
  }
}

describe('compiled policy conditions', () => {
  it('return what json-logic-js returns, for any rule and data', () => {
    fc.assert(
      fc.property(rule, data, (logic, d) => {
        expect(outcome(() => evaluateCompiled(logic, d))).toEqual(outcome(() => interpret(logic, d)));
      }),
      { numRuns: 5000 },
    );
  });
});
