/**
 * Filters and sort orders compiled to SQL, per driver.
 *
 * Field paths are validated (dotted segments of [A-Za-z0-9_]) before they are written into SQL as
 * JSON path literals; every value is a bound parameter, so a value is only ever data.
 *
 * A data field is `json_extract(data, '$."a"."b"')` on SQLite and `data->'a'->'b'` (JSONB) on
 * PostgreSQL: both keep the JSON type, so numbers compare as numbers and strings as strings.
 * Conditions are type-strict on both drivers: `gt 5` matches only numbers, `lt "m"` only strings,
 * `eq 1` never matches `true` or `"1"`. Missing and JSON null sort as the smallest value. Strings
 * compare bytewise on SQLite and in the database collation on PostgreSQL (the same for ASCII under
 * C/C.UTF-8). `contains` lower-cases both sides (ASCII only on SQLite).
 */
import { InvalidQueryError } from './entity-errors.ts';
import type { FieldCondition, Filter, QueryOptions } from './entity-types.ts';
import type { SqlDatabase, SqlParam } from './types.ts';

type Driver = SqlDatabase['driver'];

/** The store's own fields, by the JSON type their values must have. */
const COLUMNS = {
  id: 'integer',
  version: 'integer',
  key: 'string',
  created_at: 'string',
  updated_at: 'string',
} as const;
type Column = keyof typeof COLUMNS;

const SEGMENT = /^[A-Za-z0-9_]{1,64}$/;
const MAX_SEGMENTS = 8;
const MAX_FILTER_DEPTH = 8;
const MAX_CONDITIONS = 100;
const MAX_IN_VALUES = 1000;
const MAX_ORDER_KEYS = 5;

export interface ParsedField {
  field: string;
  /** Set for the store's own fields. */
  column?: Column;
  /** Path into `data` (empty for a column). */
  path: string[];
}

export function parseField(field: unknown): ParsedField {
  if (typeof field !== 'string') throw new InvalidQueryError(String(field), 'a field must be a string');
  if (Object.hasOwn(COLUMNS, field)) return { field, column: field as Column, path: [] };
  const path = field.split('.');
  if (path.length > MAX_SEGMENTS || !path.every((s) => SEGMENT.test(s))) {
    throw new InvalidQueryError(field, `invalid field "${field}": dotted names of letters, digits and _`);
  }
  return { field, path };
}

/** The SQL expression of a field: the column, or the typed JSON value (what indexes are built on). */
export function fieldExpression(driver: Driver, f: ParsedField): string {
  if (f.column) return f.column;
  // Segments are validated above, so they are safe inside these literals.
  if (driver === 'sqlite') return `json_extract(data, '${sqlitePath(f.path)}')`;
  return `data${f.path.map((s) => `->'${s}'`).join('')}`;
}

function sqlitePath(path: string[]): string {
  return `$${path.map((s) => `."${s}"`).join('')}`;
}

/** A data field as text (PostgreSQL `->>`), for `contains`. */
function textExpression(driver: Driver, f: ParsedField): string {
  if (f.column || driver === 'sqlite') return fieldExpression(driver, f);
  const head = f.path.slice(0, -1).map((s) => `->'${s}'`);
  return `data${head.join('')}->>'${f.path[f.path.length - 1]}'`;
}

/** SQL true when the data field holds a JSON value of this kind. */
function typeGuard(driver: Driver, f: ParsedField, kind: 'number' | 'string' | 'scalar'): string {
  if (driver === 'sqlite') {
    const t = `json_type(data, '${sqlitePath(f.path)}')`;
    if (kind === 'number') return `${t} IN ('integer', 'real')`;
    if (kind === 'string') return `${t} = 'text'`;
    return `${t} IN ('integer', 'real', 'text')`;
  }
  const t = `jsonb_typeof(${fieldExpression(driver, f)})`;
  if (kind === 'scalar') return `${t} IN ('number', 'string')`;
  return `${t} = '${kind}'`;
}

/** Collects bound values and hands out their `$n` placeholders. */
export class Params {
  readonly values: SqlParam[] = [];
  constructor(private readonly driver: Driver) {}
  add(value: SqlParam): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
  /** A JSON value to compare with a data field: JSONB on PostgreSQL, the plain value on SQLite. */
  json(value: string | number): string {
    return this.driver === 'postgres' ? `${this.add(JSON.stringify(value))}::jsonb` : this.add(value);
  }
}

const SQL_OPS = { eq: '=', ne: '<>', lt: '<', lte: '<=', gt: '>', gte: '>=' } as const;

function describeType(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
}

function checkValue(f: ParsedField, value: unknown, allowed: string[]): void {
  const kind = describeType(value);
  if (!allowed.includes(kind)) {
    throw new InvalidQueryError(f.field, `"${f.field}" cannot be compared with a value of type ${kind}`);
  }
  if (kind === 'number' && !Number.isFinite(value)) {
    throw new InvalidQueryError(f.field, `"${f.field}" needs a finite number`);
  }
  if (f.column && COLUMNS[f.column] === 'integer' && kind === 'number' && !Number.isSafeInteger(value)) {
    throw new InvalidQueryError(f.field, `"${f.field}" is an integer`);
  }
}

function compileColumn(driver: Driver, f: ParsedField, c: FieldCondition, p: Params): string {
  const col = f.column!;
  const kind = COLUMNS[col] === 'integer' ? 'number' : 'string';
  if (c.op === 'contains') {
    if (kind !== 'string') throw new InvalidQueryError(f.field, `"${f.field}" is not a string field`);
    checkValue(f, c.value, ['string']);
    const find = driver === 'sqlite' ? 'instr' : 'strpos';
    return `COALESCE(${find}(lower(${col}), lower(${p.add(c.value)})) > 0, FALSE)`;
  }
  if (c.op === 'in') {
    if (!Array.isArray(c.value)) throw new InvalidQueryError(f.field, '"in" needs an array');
    if (c.value.length > MAX_IN_VALUES) throw new InvalidQueryError(f.field, `"in" takes at most ${MAX_IN_VALUES}`);
    if (c.value.length === 0) return 'FALSE';
    for (const v of c.value) checkValue(f, v, [kind]);
    return `${col} IN (${c.value.map((v) => p.add(v)).join(', ')})`;
  }
  const op = SQL_OPS[c.op as keyof typeof SQL_OPS];
  if (!op) throw new InvalidQueryError(f.field, `unknown operator "${String(c.op)}"`);
  const nullable = col === 'key' && (c.op === 'eq' || c.op === 'ne');
  checkValue(f, c.value, nullable ? [kind, 'null'] : [kind]);
  if (c.value === null) return c.op === 'eq' ? `${col} IS NULL` : `${col} IS NOT NULL`;
  if (c.op === 'ne') return `NOT COALESCE(${col} = ${p.add(c.value as SqlParam)}, FALSE)`;
  return `${col} ${op} ${p.add(c.value as SqlParam)}`;
}

function compileData(driver: Driver, f: ParsedField, c: FieldCondition, p: Params): string {
  const x = fieldExpression(driver, f);
  if (c.op === 'contains') {
    checkValue(f, c.value, ['string']);
    const find = driver === 'sqlite' ? 'instr' : 'strpos';
    return `(${typeGuard(driver, f, 'string')} AND ${find}(lower(${textExpression(driver, f)}), lower(${p.add(c.value)})) > 0)`;
  }
  if (c.op === 'in') {
    if (!Array.isArray(c.value)) throw new InvalidQueryError(f.field, '"in" needs an array');
    if (c.value.length > MAX_IN_VALUES) throw new InvalidQueryError(f.field, `"in" takes at most ${MAX_IN_VALUES}`);
    if (c.value.length === 0) return 'FALSE';
    for (const v of c.value) checkValue(f, v, ['string', 'number']);
    return `(${x} IN (${c.value.map((v) => p.json(v)).join(', ')}) AND ${typeGuard(driver, f, 'scalar')})`;
  }
  const op = SQL_OPS[c.op as keyof typeof SQL_OPS];
  if (!op) throw new InvalidQueryError(f.field, `unknown operator "${String(c.op)}"`);
  if (c.op === 'ne') return `NOT COALESCE(${compileData(driver, f, { ...c, op: 'eq' }, p)}, FALSE)`;
  if (c.op === 'eq') {
    checkValue(f, c.value, ['string', 'number', 'boolean', 'null']);
    if (c.value === null) return driver === 'sqlite' ? `${x} IS NULL` : `(${x} IS NULL OR ${x} = 'null'::jsonb)`;
    if (typeof c.value === 'boolean') {
      // Literal, not bound: better-sqlite3 cannot bind booleans, and there are only two.
      return driver === 'sqlite'
        ? `json_type(data, '${sqlitePath(f.path)}') = '${c.value}'`
        : `${x} = '${c.value}'::jsonb`;
    }
  } else {
    checkValue(f, c.value, ['string', 'number']);
  }
  const value = c.value as string | number;
  const guard = typeGuard(driver, f, typeof value === 'number' ? 'number' : 'string');
  return `(${x} ${op} ${p.json(value)} AND ${guard})`;
}

interface FilterBudget {
  conditions: number;
}

function compileNode(driver: Driver, filter: Filter, p: Params, depth: number, budget: FilterBudget): string {
  if (depth > MAX_FILTER_DEPTH) throw new InvalidQueryError('filter', `filters nest at most ${MAX_FILTER_DEPTH} deep`);
  if (typeof filter !== 'object' || filter === null || Array.isArray(filter)) {
    throw new InvalidQueryError('filter', 'a filter is an object');
  }
  if ('all' in filter || 'any' in filter) {
    const all = 'all' in filter;
    const parts = all ? (filter as { all: Filter[] }).all : (filter as { any: Filter[] }).any;
    if (!Array.isArray(parts)) throw new InvalidQueryError('filter', `"${all ? 'all' : 'any'}" needs an array`);
    if (parts.length === 0) return all ? 'TRUE' : 'FALSE';
    const sql = parts.map((part) => compileNode(driver, part, p, depth + 1, budget));
    return `(${sql.join(all ? ' AND ' : ' OR ')})`;
  }
  if (++budget.conditions > MAX_CONDITIONS) {
    throw new InvalidQueryError('filter', `a filter has at most ${MAX_CONDITIONS} conditions`);
  }
  const c = filter as FieldCondition;
  const f = parseField(c.field);
  return f.column ? compileColumn(driver, f, c, p) : compileData(driver, f, c, p);
}

/** The SQL condition of a filter (`TRUE` without one), its values added to `p`. */
export function compileFilter(driver: Driver, filter: Filter | undefined, p: Params): string {
  if (filter === undefined) return 'TRUE';
  return compileNode(driver, filter, p, 0, { conditions: 0 });
}

/** `ORDER BY` terms; ties break on `id` ascending. Missing values sort as the smallest. */
export function compileOrder(driver: Driver, order: QueryOptions['order']): string {
  const terms: string[] = [];
  let hasId = false;
  if (order !== undefined && !Array.isArray(order)) throw new InvalidQueryError('order', 'order is an array');
  if ((order?.length ?? 0) > MAX_ORDER_KEYS)
    throw new InvalidQueryError('order', `at most ${MAX_ORDER_KEYS} sort keys`);
  for (const term of order ?? []) {
    const f = parseField(term?.field);
    const direction = term.direction ?? 'asc';
    if (direction !== 'asc' && direction !== 'desc') {
      throw new InvalidQueryError(f.field, `direction is "asc" or "desc", not "${String(direction)}"`);
    }
    const expr = fieldExpression(driver, f);
    const nullable = !f.column || f.column === 'key';
    // SQLite already sorts NULL first ascending; PostgreSQL's default is the opposite.
    const nulls = driver === 'postgres' && nullable ? (direction === 'asc' ? ' NULLS FIRST' : ' NULLS LAST') : '';
    terms.push(`${expr} ${direction.toUpperCase()}${nulls}`);
    if (f.column === 'id') {
      hasId = true;
      break; // ids are unique: later keys cannot matter
    }
  }
  if (!hasId) terms.push('id ASC');
  return terms.join(', ');
}

function filterShape(filter: Filter): string {
  if (typeof filter !== 'object' || filter === null) return '?';
  if ('all' in filter && Array.isArray(filter.all)) return `all(${filter.all.map(filterShape).join(', ')})`;
  if ('any' in filter && Array.isArray(filter.any)) return `any(${filter.any.map(filterShape).join(', ')})`;
  const c = filter as FieldCondition;
  return `${String(c.field)} ${String(c.op)}`;
}

/** A query without its values, for logs and metrics: `query item filter(name contains) order(rating desc)`. */
export function queryShape(kind: string, type: string, options: QueryOptions = {}): string {
  const parts = [kind, type];
  if (options.filter !== undefined) parts.push(`filter(${filterShape(options.filter)})`);
  if (options.order?.length) {
    parts.push(`order(${options.order.map((o) => `${String(o?.field)} ${o?.direction ?? 'asc'}`).join(', ')})`);
  }
  if (options.offset) parts.push('offset');
  if (options.limit !== undefined) parts.push('limit');
  if (options.expand?.length) parts.push(`expand(${options.expand.join(', ')})`);
  if (options.count) parts.push('count');
  return parts.join(' ');
}
