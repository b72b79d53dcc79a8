/**
 * The compile bound of tool schemas (plugins/schema-validate: schema-inspect.ts `max_compile`,
 * tool-schema.ts): ajv compiles on the event loop, so a schema whose counted compile work is over
 * the bound is refused with the reason before ajv sees it; the every-error validator is compiled
 * only for a value that failed, once; after `warmToolSchemas` a schema's first compile builds that
 * schema alone (the meta-schema is compiled already). Counted work and outcomes, never a clock.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { defaultLimits, inspectSchema } from '../../plugins/schema-validate/schema-inspect.ts';
import { compileToolSchema, warmToolSchemas } from '../../plugins/schema-validate/tool-schema.ts';
import { alternatives } from '../helpers/hostile-schemas.ts';

/** The ajv core class both dialects extend: its prototype is where compiling happens. */
const core = Object.getPrototypeOf(Ajv2020.prototype) as {
  compile(schema: unknown): unknown;
  _compileSchemaEnv(env: unknown): unknown;
};

const echo = {
  type: 'object',
  properties: { message: { type: 'string' } },
  required: ['message'],
  additionalProperties: false,
};

afterEach(() => {
  vi.restoreAllMocks();
});

describe('max_compile', () => {
  it('refuses 600 and 1,900 alternatives on every item with the reason; ajv never compiles them', () => {
    const compile = vi.spyOn(core, 'compile');
    for (const n of [600, 1900]) {
      const refused = compileToolSchema(alternatives(n), defaultLimits);
      expect(refused).toEqual({
        ok: false,
        reason: expect.stringMatching(/^compiling it would take \d+ units of work, over 300: too large to compile$/),
      });
    }
    expect(compile).not.toHaveBeenCalled();
  });

  it('admits exactly the schemas whose counted units are within the bound, at every size', () => {
    const open = { ...defaultLimits, max_compile: 1_000_000 };
    const none = inspectSchema(alternatives(0), open);
    if (!none.ok) throw new Error(none.reason);
    let admitted = 0;
    for (let n = 1; n <= 200; n++) {
      const counted = inspectSchema(alternatives(n), open);
      if (!counted.ok) throw new Error(counted.reason);
      // One alternative: a subschema, its `type`, `required` and one name, and the alternative itself.
      expect(counted.compile).toBe(none.compile + 5 * n);
      const bounded = inspectSchema(alternatives(n), defaultLimits);
      expect(bounded.ok).toBe(counted.compile <= defaultLimits.max_compile);
      if (bounded.ok) admitted = n;
    }
    // The bound sits between the echo tool (9 units) and 600 alternatives.
    expect(admitted).toBeGreaterThan(50);
    expect(admitted).toBeLessThan(600);
  });

  it('counts per alternative, pattern, format and $ref as documented', () => {
    const open = { ...defaultLimits, max_compile: 1_000_000 };
    const units = (s: unknown) => {
      const i = inspectSchema(s, open);
      if (!i.ok) throw new Error(i.reason);
      return i.compile;
    };
    // Annotations cost nothing: a description changes no count.
    expect(units({ type: 'string', description: 'x', title: 'y' })).toBe(units({ type: 'string' }));
    const plain = units({ type: 'object', properties: { a: { type: 'string' } } });
    expect(units({ type: 'object', properties: { a: { type: 'string', pattern: '^a$' } } })).toBe(plain + 13);
    expect(units({ type: 'object', properties: { a: { type: 'string', format: 'email' } } })).toBe(plain + 3);
    expect(units({ type: 'object', required: ['a', 'b', 'c'] })).toBe(units({ type: 'object' }) + 4);
    expect(units({ $defs: { s: { type: 'string' } }, type: 'object', properties: { a: { $ref: '#/$defs/s' } } })).toBe(
      units({ $defs: { s: { type: 'string' } }, type: 'object', properties: { a: {} } }) + 9,
    );
    // n alternatives of one subschema and one keyword: 3 units each.
    expect(units({ anyOf: Array(10).fill({ type: 'string' }) }) - units({ anyOf: [] })).toBe(30);
  });

  it('a structural bound is the reason given before the compile bound', () => {
    const many = { type: 'object', anyOf: Array.from({ length: 3000 }, (_, i) => ({ required: [`k${i}`] })) };
    const refused = inspectSchema(many, defaultLimits);
    expect(refused).toEqual({ ok: false, reason: 'the schema has more than 2000 subschemas' });
  });
});

describe('compiling', () => {
  it('compiles the every-error validator only for a failed value, and once', () => {
    warmToolSchemas();
    const compile = vi.spyOn(core, 'compile');
    const c = compileToolSchema(echo, defaultLimits);
    if (!c.ok) throw new Error(c.reason);
    expect(compile).toHaveBeenCalledTimes(1);
    expect(c.schema.validate({ message: 'hi' }, '$').valid).toBe(true);
    expect(compile).toHaveBeenCalledTimes(1);
    expect(c.schema.validate({ message: 1, extra: true }, '$').violations).toHaveLength(2);
    expect(c.schema.validate({ message: 2 }, '$').valid).toBe(false);
    expect(compile).toHaveBeenCalledTimes(2);
  });

  it('after warmToolSchemas, a first compile builds the schema alone, not a meta-schema', () => {
    warmToolSchemas();
    const envs = vi.spyOn(core, '_compileSchemaEnv');
    for (const $schema of [undefined, 'http://json-schema.org/draft-07/schema#']) {
      envs.mockClear();
      const c = compileToolSchema($schema ? { $schema, ...echo } : echo, defaultLimits);
      if (!c.ok) throw new Error(c.reason);
      expect(envs).toHaveBeenCalledTimes(1);
      // The every-error validator does not check the schema against its meta-schema again.
      c.schema.validate({}, '$');
      expect(envs).toHaveBeenCalledTimes(2);
    }
  });
});
