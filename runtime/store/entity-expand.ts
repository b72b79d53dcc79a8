/**
 * Relation expansion on read. A path like `author.org` names reference fields: `data.author`
 * holds an entity id (or an array of ids) and is replaced by that entity, then `org` is looked up
 * in the author's data and replaced the same way. A segment that holds a plain object (not a
 * reference) is stepped into without a lookup, so `meta.owner` expands `data.meta.owner`.
 * Lookups are by id whatever the type (ids are unique store-wide), one query per level.
 * A reference to a missing entity becomes null.
 *
 * Budgets: a path deeper than `maxDepth` segments fails before any read (`max_depth`); the
 * entities a level would add are counted before they are read, and returned + expanded above
 * `maxEntities` fails (`max_entities`).
 */
import { InvalidQueryError, type QueryBudgetExceededError } from './entity-errors.ts';
import { ENTITY_COLUMNS, type EntityRow, toEntity } from './entity-schema.ts';
import { parseField } from './entity-sql.ts';
import type { Entity } from './entity-types.ts';
import type { SqlExecutor } from './types.ts';

/** Ids per `IN (...)` lookup. */
export const ID_CHUNK = 500;

interface PathNode {
  children: Map<string, PathNode>;
}

/** Validates the paths and merges them into a tree (shared prefixes are expanded once). */
export function expandTree(
  paths: readonly string[],
  maxDepth: number,
  onBudget: (budget: 'max_depth', limit: number, requested: number) => QueryBudgetExceededError,
): PathNode {
  const root: PathNode = { children: new Map() };
  if (!Array.isArray(paths)) throw new InvalidQueryError('expand', 'expand is an array of field paths');
  for (const path of paths) {
    parseField(path); // validates
    const segments = path.split('.');
    if (segments.length > maxDepth) throw onBudget('max_depth', maxDepth, segments.length);
    let node = root;
    for (const s of segments) {
      let next = node.children.get(s);
      if (!next) {
        next = { children: new Map() };
        node.children.set(s, next);
      }
      node = next;
    }
  }
  return root;
}

function isRef(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v > 0;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Rows by id, any type, in chunks. */
export async function rowsById(
  ex: SqlExecutor,
  table: string,
  ids: readonly number[],
): Promise<Map<number, EntityRow>> {
  const out = new Map<number, EntityRow>();
  for (let i = 0; i < ids.length; i += ID_CHUNK) {
    const chunk = ids.slice(i, i + ID_CHUNK);
    const marks = chunk.map((_, n) => `$${n + 1}`).join(', ');
    const rows = await ex.query<EntityRow>(`SELECT ${ENTITY_COLUMNS} FROM ${table} WHERE id IN (${marks})`, chunk);
    for (const row of rows) out.set(Number(row.id), row);
  }
  return out;
}

interface Slot {
  holder: Record<string, unknown> | unknown[];
  at: string | number;
  id: number;
  node: PathNode;
}

/**
 * Expands `tree` in `items` in place. Returns the entities read (for the version bookkeeping of
 * a transaction); `returned` is how many entities the query already returns.
 */
export async function expandEntities(
  ex: SqlExecutor,
  table: string,
  items: Entity[],
  tree: PathNode,
  budget: { maxEntities: number; returned: number },
  onBudget: (budget: 'max_entities', limit: number, requested: number) => QueryBudgetExceededError,
): Promise<Entity[]> {
  const loaded: Entity[] = [];
  let frontier = items.map((e) => ({ obj: e.data as Record<string, unknown>, node: tree }));
  let total = budget.returned;
  while (frontier.length > 0) {
    const slots: Slot[] = [];
    const next: typeof frontier = [];
    for (const { obj, node } of frontier) {
      for (const [segment, child] of node.children) {
        const value = obj[segment];
        if (isRef(value)) slots.push({ holder: obj, at: segment, id: value, node: child });
        else if (Array.isArray(value)) {
          value.forEach((v, i) => {
            if (isRef(v)) slots.push({ holder: value, at: i, id: v, node: child });
          });
        } else if (isPlainObject(value) && child.children.size > 0) next.push({ obj: value, node: child });
      }
    }
    if (slots.length > 0) {
      total += slots.length;
      if (total > budget.maxEntities) throw onBudget('max_entities', budget.maxEntities, total);
      const rows = await rowsById(ex, table, [...new Set(slots.map((s) => s.id))]);
      for (const slot of slots) {
        const row = rows.get(slot.id);
        // A fresh object per reference: callers may change one without touching another.
        const entity = row ? toEntity(row) : null;
        (slot.holder as Record<string | number, unknown>)[slot.at] = entity;
        if (entity) {
          loaded.push(entity);
          if (slot.node.children.size > 0) next.push({ obj: entity.data, node: slot.node });
        }
      }
    }
    frontier = next;
  }
  return loaded;
}
