/**
 * Public contract of the records plugin for other plugins: a `record-type` resource's value
 * (declared fields over one entity type of an entity store, and the record's JSON shape), and
 * the FastAPI-style validation helpers every JSON API stage of this family shares.
 */
import type { Entity, EntityStore, Filter } from '../../runtime/index.ts';
import type { FieldSpecs } from './fields.ts';
import type { ValidationIssue } from './issues.ts';

export type { FieldSpec, FieldSpecs, FieldType, ItemSpec } from './fields.ts';
export { validateBody, visibleFields } from './fields.ts';
export type { ValidationIssue } from './issues.ts';
export { issue, validationError } from './issues.ts';
export type { IntegerParam, QueryValues } from './params.ts';
export { choiceParam, integerParam, stringParam } from './params.ts';

/** The value of a `record-type` resource. */
export interface RecordType {
  /** Singular display name, e.g. `Entity` (messages, OpenAPI schema names). */
  title: string;
  /** Plural display name, e.g. `Entities` (OpenAPI tags and list summaries). */
  pluralTitle: string;
  /** The entity store's type name. */
  entityType: string;
  fields: FieldSpecs;
  /** Fields `?search=` looks into (case-insensitive substring). */
  search: string[];
  /** Store timestamps shown in a record (`created_at`, `updated_at`). */
  timestamps: Array<'created_at' | 'updated_at'>;
  /** The store (throws 503 `unavailable` while the database is not open). */
  store(): EntityStore;
  /** The record as clients see it: `{id, ...visible fields, ...timestamps}`. */
  project(entity: Entity): Record<string, unknown>;
  /** Checks a create or partial-update body: the accepted values, or a 422 with every issue. */
  parse(body: unknown, mode: 'create' | 'update'): Record<string, unknown>;
  /** JSON Schemas of the record, its create body and its update body (OpenAPI components). */
  schemas(): { record: Record<string, unknown>; create: Record<string, unknown>; update: Record<string, unknown> };
  /** 404 for a missing record: `<title> <id> not found`. */
  notFound(id: number | string): Error;
}

/** Issues found, as one 422 (helper for stages that collect issues as they go). */
export function throwIfIssues(issues: ValidationIssue[], make: (issues: ValidationIssue[]) => Error): void {
  if (issues.length > 0) throw make(issues);
}

/**
 * Every entity of `type` matching `filter`, read in pages of the store's largest page by
 * ascending id (keyset paging: each page is an index range, however deep).
 */
export async function scanAll(
  store: Pick<EntityStore, 'query' | 'limits'>,
  type: string,
  filter?: Filter,
  requestId?: string,
): Promise<Entity[]> {
  const out: Entity[] = [];
  const page = store.limits.maxEntities;
  let after = 0;
  for (;;) {
    const byId = { field: 'id', op: 'gt' as const, value: after };
    const { items } = await store.query(type, {
      filter: filter ? { all: [byId, filter] } : byId,
      order: [{ field: 'id', direction: 'asc' }],
      limit: page,
      requestId,
    });
    out.push(...items);
    if (items.length < page) return out;
    after = items.at(-1)!.id;
  }
}

type Queue = <T>(fn: () => Promise<T>) => Promise<T>;

/**
 * Formerly an in-process queue running one write at a time per store. The entity store now
 * bounds its own concurrent writes (PostgreSQL: a write queue below the pool size, see
 * runtime/store/entity-queue.ts) and orders conflicting ones with row locks and version checks,
 * so this runs `fn` as it is. Kept so that callers need not change.
 */
export function writeQueue(_store: object): Queue {
  return (fn) => fn();
}
