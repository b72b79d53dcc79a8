/**
 * Reading the entity API's request: path parameters, query parameters (list, filter, order,
 * expand, paging) and bodies. Everything a client sends is checked here, before the store is
 * touched, and refused with a 400 naming the parameter or field at fault.
 */
import {
  type FieldCondition,
  type Filter,
  type GatewayContext,
  GatewayError,
  type QueryOptions,
  requireJsonContentType,
} from '../../runtime/index.ts';

export const TYPE_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
/** A field path: dotted names into the entity's data, or one of the store's own fields. */
export const FIELD_PATTERN = /^[a-z][a-z0-9_]{0,63}(\.[a-z][a-z0-9_]{0,63}){0,7}$/;
/** The store's own fields: a filter or order on these names means the entity's, not the data's. */
export const RESERVED_FIELDS = new Set(['id', 'key', 'version', 'created_at', 'updated_at']);
const OPS = ['eq', 'ne', 'lt', 'lte', 'gt', 'gte', 'in', 'contains'] as const;
type Op = (typeof OPS)[number];
const WHERE = /^where\[([^\]]*)\](?:\[([^\]]*)\])?$/;
const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;
const MAX_OFFSET = 1_000_000_000;
const MAX_ORDER_KEYS = 5; // the store's own limit
const MAX_EXPAND = 16;
const MAX_FILTER_NODES = 100;
const MAX_FILTER_DEPTH = 8;
const MAX_IN_VALUES = 100;
const MAX_KEY_LENGTH = 200;

export function badParam(param: string, message: string, extra: Record<string, unknown> = {}): GatewayError {
  return new GatewayError('bad_request', message, { code: 'invalid_parameter', details: { param, ...extra } });
}

export function badField(field: string, message: string): GatewayError {
  return new GatewayError('bad_request', message, { code: 'invalid_field', details: { field } });
}

/** `:type` of the route, checked. */
export function entityType(ctx: GatewayContext): string {
  const type = (ctx.params as Record<string, string | undefined>).type;
  if (type === undefined) throw new Error('entity-api: the route has no :type path parameter');
  if (!TYPE_PATTERN.test(type)) {
    throw badParam('type', `Invalid entity type "${type}": it must match [a-z][a-z0-9_]* (at most 64 characters)`);
  }
  return type;
}

/** `:id` of the route, a positive integer. */
export function entityId(ctx: GatewayContext): number {
  const raw = (ctx.params as Record<string, string | undefined>).id ?? '';
  const id = /^[1-9]\d{0,15}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(id)) throw badParam('id', `Invalid entity id "${raw}": it must be a positive integer`);
  return id;
}

/** Query parameters, each given at most once, all of them among `allowed` (or `where[...]` when allowed). */
export function queryParams(ctx: GatewayContext, allowed: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(ctx.querystring)) {
    const known = allowed.includes(name) || (allowed.includes('where') && name.startsWith('where['));
    if (!known) {
      throw badParam(
        name,
        allowed.length === 0
          ? `Unknown query parameter "${name}": this operation takes none`
          : `Unknown query parameter "${name}" (allowed: ${allowed.map((a) => (a === 'where' ? 'where[field][op]' : a)).join(', ')})`,
      );
    }
    if (out.has(name)) throw badParam(name, `Query parameter "${name}" is given more than once`);
    out.set(name, value);
  }
  return out;
}

function integer(params: Map<string, string>, name: string, min: number, max: number): number | undefined {
  const raw = params.get(name);
  if (raw === undefined) return undefined;
  const n = /^-?\d{1,16}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw badParam(name, `Query parameter "${name}" must be an integer from ${min} to ${max}, got "${raw}"`, {
      min,
      max,
    });
  }
  return n;
}

function field(param: string, value: string): string {
  if (!FIELD_PATTERN.test(value)) {
    throw badParam(param, `Invalid field "${value}" in "${param}": a field is [a-z][a-z0-9_]*, dotted for nested ones`);
  }
  return value;
}

/** A scalar from a query string: numbers, true/false/null as such; "quoted" forces a string. */
function scalar(raw: string): string | number | boolean | null {
  if (raw === 'true') return true;
  if (raw === 'false') return false;
  if (raw === 'null') return null;
  if (NUMBER.test(raw) && Number.isFinite(Number(raw))) return Number(raw);
  if (raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"')) return raw.slice(1, -1);
  return raw;
}

function condition(param: string, fieldPath: string, op: string, raw: string): FieldCondition {
  field(param, fieldPath);
  if (!(OPS as readonly string[]).includes(op)) {
    throw badParam(param, `Unknown operator "${op}" in "${param}" (allowed: ${OPS.join(', ')})`);
  }
  const o = op as Op;
  if (o === 'contains') return { field: fieldPath, op: o, value: raw };
  if (o === 'in') {
    const values = raw.split(',').map(scalar);
    if (values.length > MAX_IN_VALUES) throw badParam(param, `"${param}" lists more than ${MAX_IN_VALUES} values`);
    if (values.some((v) => typeof v !== 'string' && typeof v !== 'number')) {
      throw badParam(param, `"${param}" takes strings and numbers only`);
    }
    return { field: fieldPath, op: o, value: values as Array<string | number> };
  }
  return { field: fieldPath, op: o, value: scalar(raw) };
}

/** `filter=<JSON>`: the store's Filter, checked node by node. */
function jsonFilter(raw: string): Filter {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw badParam('filter', 'Query parameter "filter" is not valid JSON');
  }
  let nodes = 0;
  const check = (node: unknown, path: string, depth: number): Filter => {
    if (++nodes > MAX_FILTER_NODES) throw badParam('filter', `"filter" has more than ${MAX_FILTER_NODES} conditions`);
    if (depth > MAX_FILTER_DEPTH) throw badParam('filter', `"filter" nests deeper than ${MAX_FILTER_DEPTH}`);
    if (node === null || typeof node !== 'object' || Array.isArray(node)) {
      throw badParam('filter', `"filter${path}" must be an object: {field, op, value}, {all: [...]} or {any: [...]}`);
    }
    const o = node as Record<string, unknown>;
    const keys = Object.keys(o);
    for (const group of ['all', 'any'] as const) {
      if (group in o) {
        if (keys.length !== 1 || !Array.isArray(o[group])) {
          throw badParam('filter', `"filter${path}.${group}" must be the only key, holding an array of filters`);
        }
        const items = (o[group] as unknown[]).map((n, i) => check(n, `${path}.${group}[${i}]`, depth + 1));
        return group === 'all' ? { all: items } : { any: items };
      }
    }
    const extra = keys.filter((k) => k !== 'field' && k !== 'op' && k !== 'value');
    if (extra.length > 0) throw badParam('filter', `"filter${path}" has unknown key "${extra[0]}"`);
    if (typeof o.field !== 'string') throw badParam('filter', `"filter${path}.field" must be a string`);
    field('filter', o.field);
    const op = o.op ?? 'eq';
    if (typeof op !== 'string' || !(OPS as readonly string[]).includes(op)) {
      throw badParam('filter', `"filter${path}.op" must be one of ${OPS.join(', ')}`);
    }
    const v = o.value;
    const isScalar = v === null || ['string', 'number', 'boolean'].includes(typeof v);
    if (op === 'in') {
      if (
        !Array.isArray(v) ||
        v.length > MAX_IN_VALUES ||
        v.some((x) => typeof x !== 'string' && typeof x !== 'number')
      ) {
        throw badParam(
          'filter',
          `"filter${path}.value" must be an array of strings and numbers (at most ${MAX_IN_VALUES})`,
        );
      }
    } else if (op === 'contains') {
      if (typeof v !== 'string') throw badParam('filter', `"filter${path}.value" must be a string for contains`);
    } else if (!isScalar) {
      throw badParam('filter', `"filter${path}.value" must be a string, number, boolean or null`);
    }
    return { field: o.field, op, value: v } as FieldCondition;
  };
  return check(value, '', 1);
}

export interface ListRequest extends QueryOptions {
  limit: number;
  offset: number;
}

export const LIST_PARAMS = ['limit', 'offset', 'where', 'filter', 'order', 'expand', 'count'] as const;

/** The list operation's query: paging, filters (`where[...]` and `filter`, all must hold), order, expand, count. */
export function listRequest(ctx: GatewayContext, paging: { defaultLimit: number; maxLimit: number }): ListRequest {
  const params = queryParams(ctx, LIST_PARAMS);
  const limit = integer(params, 'limit', 1, paging.maxLimit) ?? paging.defaultLimit;
  const offset = integer(params, 'offset', 0, MAX_OFFSET) ?? 0;
  const conditions: Filter[] = [];
  for (const [name, value] of params) {
    const m = WHERE.exec(name);
    if (name.startsWith('where[')) {
      if (!m) throw badParam(name, `Malformed "${name}": use where[field]=value or where[field][op]=value`);
      conditions.push(condition(name, m[1]!, m[2] ?? 'eq', value));
    }
  }
  const filterRaw = params.get('filter');
  if (filterRaw !== undefined) conditions.push(jsonFilter(filterRaw));
  const out: ListRequest = { limit, offset, requestId: ctx.state.requestId };
  if (conditions.length === 1) out.filter = conditions[0];
  else if (conditions.length > 1) out.filter = { all: conditions };
  const order = params.get('order');
  if (order !== undefined) out.order = orderKeys(order);
  const expand = expandPaths(params.get('expand'));
  if (expand) out.expand = expand;
  const count = params.get('count');
  if (count !== undefined) {
    if (!['true', 'false', '1', '0'].includes(count)) throw badParam('count', '"count" must be true or false');
    out.count = count === 'true' || count === '1';
  }
  return out;
}

/** `order=-rating,name`: descending with a leading `-`. */
function orderKeys(raw: string): NonNullable<QueryOptions['order']> {
  const keys = raw.split(',');
  if (keys.length > MAX_ORDER_KEYS) throw badParam('order', `"order" takes at most ${MAX_ORDER_KEYS} fields`);
  return keys.map((k) => {
    const desc = k.startsWith('-');
    return { field: field('order', desc ? k.slice(1) : k), direction: desc ? 'desc' : 'asc' };
  });
}

/** `expand=author,author.org`. */
export function expandPaths(raw: string | undefined): string[] | undefined {
  if (raw === undefined) return undefined;
  const paths = raw.split(',');
  if (paths.length > MAX_EXPAND) throw badParam('expand', `"expand" takes at most ${MAX_EXPAND} paths`);
  return paths.map((p) => field('expand', p));
}

/** `key` of a create: an optional caller-chosen key, unique per type. */
export function createKey(params: Map<string, string>): string | undefined {
  const key = params.get('key');
  if (key === undefined) return undefined;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || /\p{Cc}/u.test(key)) {
    throw badParam('key', `"key" must be 1 to ${MAX_KEY_LENGTH} printable characters`);
  }
  return key;
}

/** Refuses a body not declared as JSON (415), the runtime's rule for every JSON API. */
export function requireJsonType(ctx: GatewayContext): void {
  requireJsonContentType(ctx);
}

/**
 * A write's top-level fields: field names (so that every stored field can be filtered and sorted
 * on), and not the store's own.
 */
export function checkFields(body: Record<string, unknown>): Record<string, unknown> {
  for (const key of Object.keys(body)) {
    if (!/^[a-z][a-z0-9_]{0,63}$/.test(key)) {
      throw badField(key, `Invalid field name "${key}": top-level fields must match [a-z][a-z0-9_]*`);
    }
    if (RESERVED_FIELDS.has(key)) {
      throw badField(key, `Field "${key}" is reserved for the store (id, key, version, created_at, updated_at)`);
    }
  }
  return body;
}
