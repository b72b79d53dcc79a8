/**
 * The bounded walk of arbitrary JSON that the wire readers share (tool schemas, JSON arguments,
 * structured results): every string value, and with `names` every property name, handed to `on`
 * with where it lives. The walk goes at most `jsonWalkLimits.depth` levels deep and over at most
 * `jsonWalkLimits.entries` keys and items per budget (one budget per body); what lies beyond is
 * handed over whole as its JSON text (kind `rest`, one `JSON.stringify`), so a hostile body costs
 * time proportional to its size and no text in it goes unread.
 */

/** The bounds of a walk of arbitrary JSON inside one body. */
export const jsonWalkLimits = { depth: 32, entries: 20_000 } as const;

/** The remaining allowance of a walk of arbitrary JSON in one body. */
export interface WalkBudget {
  entries: number;
}

export type Holder = Record<string, unknown> | unknown[];

/** A string value, a property name (`holder[key]` is then the property), or JSON beyond the bound. */
export type WalkKind = 'value' | 'name' | 'rest';

export type OnText = (holder: Holder, key: string | number, text: string, kind: WalkKind) => void;

/** Every string of `holder[key]` (and, with `names`, every property name), bounded as above. */
export function walkJson(
  holder: Holder,
  key: string | number,
  on: OnText,
  budget: WalkBudget,
  names: boolean,
  depth = 0,
): void {
  const value = (holder as Record<string, unknown>)[key as string];
  if (typeof value === 'string') {
    on(holder, key, value, 'value');
    return;
  }
  if (typeof value !== 'object' || value === null) return;
  const array = Array.isArray(value);
  const keys = array ? undefined : Object.keys(value);
  const entries = array ? value.length : (keys as string[]).length;
  if (depth >= jsonWalkLimits.depth || entries > budget.entries) {
    on(holder, key, JSON.stringify(value), 'rest');
    return;
  }
  budget.entries -= entries;
  if (array) {
    for (let i = 0; i < value.length; i++) walkJson(value, i, on, budget, names, depth + 1);
    return;
  }
  for (const k of keys as string[]) {
    if (names) on(value as Record<string, unknown>, k, k, 'name');
    walkJson(value as Record<string, unknown>, k, on, budget, names, depth + 1);
  }
}
