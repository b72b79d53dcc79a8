/**
 * Tool schema dialects in schema-validate (plugins/schema-validate/tool-schema.ts): 2020-12 when
 * a schema names none, with its keywords in force; draft-07 when `$schema` names it, read by
 * draft-07's rules; any other dialect refused with the supported list.
 */
import { describe, expect, it } from 'vitest';
import { defaultLimits } from '../../plugins/schema-validate/schema-inspect.ts';
import { compileToolSchema, type ToolSchema } from '../../plugins/schema-validate/tool-schema.ts';

function compiled(schema: unknown): ToolSchema {
  const c = compileToolSchema(schema, defaultLimits);
  if (!c.ok) throw new Error(c.reason);
  return c.schema;
}

const valid = (s: ToolSchema, v: unknown) => s.validate(v, '$').valid;

describe('2020-12 by default', () => {
  it('applies prefixItems, unevaluatedProperties, dependentSchemas, $anchor and $dynamicRef', () => {
    const s = compiled({
      type: 'object',
      $defs: { word: { $anchor: 'word', type: 'string', pattern: '^[a-z]{1,32}$' } },
      properties: {
        point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false },
        tag: { $ref: '#word' },
        card: { type: 'string' },
        name: { type: 'string' },
      },
      dependentSchemas: { card: { required: ['name'] } },
      unevaluatedProperties: false,
    });
    expect(valid(s, { point: [1, 2], tag: 'abc' })).toBe(true);
    expect(valid(s, { point: [1, 2, 3] })).toBe(false); // items: false after the prefix
    expect(valid(s, { tag: 'ABC' })).toBe(false); // the anchored pattern
    expect(valid(s, { card: '4111' })).toBe(false); // dependentSchemas: card needs name
    expect(valid(s, { extra: 1 })).toBe(false); // unevaluatedProperties
    const list = compiled({
      $dynamicAnchor: 'node',
      type: 'object',
      properties: { kids: { type: 'array', items: { $dynamicRef: '#node' } }, v: { type: 'integer' } },
    });
    expect(valid(list, { v: 1, kids: [{ v: 2, kids: [] }] })).toBe(true);
    expect(valid(list, { v: 1, kids: [{ v: 'two' }] })).toBe(false);
  });
});

describe('draft-07 when named', () => {
  it('reads items as a tuple and definitions/$ref by draft-07 rules', () => {
    const s = compiled({
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      definitions: { n: { type: 'integer' } },
      properties: { pair: { type: 'array', items: [{ type: 'string' }, { $ref: '#/definitions/n' }] } },
    });
    expect(valid(s, { pair: ['a', 1] })).toBe(true);
    expect(valid(s, { pair: ['a', 'b'] })).toBe(false);
    // Under 2020-12 the same `items` array is no schema: it would not compile.
    const as2020 = compileToolSchema(
      { type: 'object', properties: { pair: { items: [{ type: 'string' }] } } },
      defaultLimits,
    );
    expect(as2020.ok).toBe(false);
  });

  it('accepts the http/https and fragment spellings of both dialects', () => {
    for (const $schema of [
      'https://json-schema.org/draft-07/schema',
      'http://json-schema.org/draft-07/schema',
      'http://json-schema.org/draft/2020-12/schema#',
    ]) {
      expect(compileToolSchema({ $schema, type: 'object' }, defaultLimits).ok).toBe(true);
    }
  });
});

describe('other dialects', () => {
  it.each([
    'https://json-schema.org/draft/2019-09/schema',
    'http://json-schema.org/draft-04/schema#',
    'https://example.com/my-meta',
  ])('refuses %s with the supported list', ($schema) => {
    const c = compileToolSchema({ $schema, type: 'object' }, defaultLimits);
    expect(c.ok).toBe(false);
    expect(c.ok ? '' : c.reason).toBe(
      `unsupported JSON Schema dialect ${JSON.stringify($schema)} (supported: https://json-schema.org/draft/2020-12/schema, http://json-schema.org/draft-07/schema#)`,
    );
  });
});
