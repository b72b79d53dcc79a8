/**
 * Strict body validation against declared fields, and query/path parameters, with FastAPI's
 * issue shape ({type, loc, msg}).
 */
import { describe, expect, it } from 'vitest';
import { type FieldSpecs, validateBody, visibleFields } from '../../plugins/records/fields.ts';
import type { ValidationIssue } from '../../plugins/records/issues.ts';
import { choiceParam, integerParam, stringParam } from '../../plugins/records/params.ts';

const fields: FieldSpecs = {
  name: { type: 'string', required: true, min_length: 1, max_length: 5 },
  description: { type: 'string', nullable: true, max_length: 10 },
  tags: { type: 'array', items: { type: 'string', max_length: 3 }, max_items: 2, default: [] },
  score: { type: 'number', read_only: true, default: 1500 },
  seen: { type: 'integer', read_only: true, hidden: true, default: 0 },
};

const types = (issues: ValidationIssue[]) => issues.map((i) => [i.loc.join('.'), i.type]);

describe('validateBody', () => {
  it('fills defaults on create', () => {
    const { value, issues } = validateBody(fields, { name: 'abc' }, 'create');
    expect(issues).toEqual([]);
    expect(value).toEqual({ name: 'abc', description: null, tags: [], score: 1500, seen: 0 });
  });

  it('reports every problem with its location', () => {
    const { issues } = validateBody(fields, { description: 5, tags: ['ok', 'long!', 3], score: 1, id: 9 }, 'create');
    expect(types(issues)).toEqual([
      ['body.score', 'extra_forbidden'],
      ['body.id', 'extra_forbidden'],
      ['body.name', 'missing'],
      ['body.description', 'string_type'],
      ['body.tags', 'too_long'],
    ]);
    expect(issues.find((i) => i.type === 'missing')?.msg).toBe('Field required');
  });

  it('is strict about types', () => {
    const spec: FieldSpecs = { n: { type: 'integer' }, x: { type: 'number' }, b: { type: 'boolean' } };
    expect(types(validateBody(spec, { n: '5', x: true, b: 'true' }, 'update').issues)).toEqual([
      ['body.n', 'int_type'],
      ['body.x', 'float_type'],
      ['body.b', 'bool_type'],
    ]);
    expect(types(validateBody(spec, { n: 1.5 }, 'update').issues)).toEqual([['body.n', 'int_type']]);
    expect(validateBody(spec, { n: -3, x: 1.5, b: false }, 'update').issues).toEqual([]);
  });

  it('checks lengths in characters and array items', () => {
    expect(types(validateBody(fields, { name: '' }, 'create').issues)).toEqual([['body.name', 'string_too_short']]);
    expect(types(validateBody(fields, { name: 'ab😀de' }, 'create').issues)).toEqual([]);
    expect(types(validateBody(fields, { name: 'abcdef' }, 'create').issues)).toEqual([
      ['body.name', 'string_too_long'],
    ]);
    expect(types(validateBody(fields, { name: 'a', tags: ['abcd'] }, 'create').issues)).toEqual([
      ['body.tags.0', 'string_too_long'],
    ]);
  });

  it('takes only the given fields on update, and refuses null where not nullable', () => {
    expect(validateBody(fields, { description: null }, 'update')).toEqual({ value: { description: null }, issues: [] });
    expect(types(validateBody(fields, { name: null }, 'update').issues)).toEqual([['body.name', 'string_type']]);
    expect(validateBody(fields, {}, 'update')).toEqual({ value: {}, issues: [] });
  });

  it('refuses a body that is not an object', () => {
    for (const body of [null, [], 'x', 3]) {
      expect(types(validateBody(fields, body, 'create').issues)).toEqual([['body', 'model_attributes_type']]);
    }
  });

  it('does not echo huge inputs', () => {
    const { issues } = validateBody(fields, { name: 'x'.repeat(10_000) }, 'create');
    expect(String(issues[0]!.input).length).toBeLessThan(300);
  });

  it('lists visible fields in declaration order', () => {
    expect(visibleFields(fields)).toEqual(['name', 'description', 'tags', 'score']);
  });
});

describe('parameters', () => {
  it('reads integers strictly, with bounds and defaults', () => {
    const issues: ValidationIssue[] = [];
    expect(integerParam(undefined, ['query', 'limit'], { default: 100 }, issues)).toBe(100);
    expect(integerParam('', ['query', 'limit'], { default: 100 }, issues)).toBe(100);
    expect(integerParam('7', ['query', 'limit'], { minimum: 1, maximum: 1000 }, issues)).toBe(7);
    expect(integerParam(['1', '9'], ['query', 'limit'], {}, issues)).toBe(9);
    expect(issues).toEqual([]);
    integerParam('1.5', ['query', 'limit'], {}, issues);
    integerParam('abc', ['query', 'skip'], {}, issues);
    integerParam('0', ['query', 'limit'], { minimum: 1 }, issues);
    integerParam('1001', ['query', 'limit'], { maximum: 1000 }, issues);
    integerParam('99999999999999999999', ['path', 'id'], {}, issues);
    expect(types(issues)).toEqual([
      ['query.limit', 'int_parsing'],
      ['query.skip', 'int_parsing'],
      ['query.limit', 'greater_than_equal'],
      ['query.limit', 'less_than_equal'],
      ['path.id', 'less_than_equal'],
    ]);
  });

  it('reads strings and choices', () => {
    const issues: ValidationIssue[] = [];
    expect(stringParam("x' OR 1=1 --", ['query', 'search'], 100, issues)).toBe("x' OR 1=1 --");
    expect(stringParam('', ['query', 'search'], 100, issues)).toBeUndefined();
    expect(choiceParam(undefined, ['query', 'method'], ['elo', 'bt'] as const, 'elo', issues)).toBe('elo');
    expect(choiceParam('bt', ['query', 'method'], ['elo', 'bt'] as const, 'elo', issues)).toBe('bt');
    expect(issues).toEqual([]);
    stringParam('x'.repeat(101), ['query', 'search'], 100, issues);
    choiceParam('nope', ['query', 'method'], ['elo', 'bt'] as const, 'elo', issues);
    expect(types(issues)).toEqual([
      ['query.search', 'string_too_long'],
      ['query.method', 'enum'],
    ]);
  });
});

describe('plural display names', () => {
  it('follows the regular English rules; irregular plurals are the plural_title option', async () => {
    const { pluralOf } = await import('../../plugins/records/resource.ts');
    const cases: Array<[string, string]> = [
      ['Entity', 'Entities'],
      ['Comparison', 'Comparisons'],
      ['Match', 'Matches'],
      ['Box', 'Boxes'],
      ['Key', 'Keys'],
      ['Day', 'Days'],
      ['Address', 'Addresses'],
    ];
    for (const [one, many] of cases) expect(pluralOf(one), one).toBe(many);
  });
});
