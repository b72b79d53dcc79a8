/**
 * Every record the chain writes is bounded, whatever a stage put in it: a client cannot turn one
 * request into a large append-only record (write amplification into a chain that is never pruned).
 *
 * - Text fields of the record (tenant, rule, regulation, phase, action) keep at most
 *   `recordTextLimit` characters.
 * - In `details`, every string keeps at most `detailTextLimit` characters, less for the names of
 *   an MCP exchange (`tool`, `method`, `session`, `claimed_session`: the protocol's name limit) and
 *   more for `prompt` (`store_prompt`); arrays keep their first `maxItems` items, objects their
 *   first `maxKeys` keys (sorted, scalar values first), keys at most `maxKeyLength` characters, nesting `maxDepth` levels.
 * - A value cut is marked: its text ends with `…`, and `details.cut` maps its JSON path
 *   (`$.details.tool`, `$.tenant`) to what it was: `{length, sha256}` for a string (length in
 *   UTF-16 code units, as JavaScript counts; the sha256 of its UTF-8 bytes, so a value known
 *   elsewhere can be matched), `{items}` / `{keys}` for an array / object, `{depth: true}` for
 *   nesting cut off.
 * - If the details are still larger than `maxDetailsBytes` (many large fields), only their
 *   top-level scalar fields are kept, each at most `fallbackTextLimit` characters, and `details.cut`
 *   says `{"$.details": {length, sha256}}` of their canonical JSON as it was.
 */
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';

export const recordTextLimit = 256;
export const detailTextLimit = 1024;
export const maxItems = 64;
export const maxKeys = 64;
export const maxKeyLength = 128;
export const maxDepth = 8;
export const maxDetailsBytes = 64 * 1024;
const fallbackTextLimit = 256;
const fallbackFields = 32;

/** Per details key, wherever it is: names of an MCP exchange (128: MCP 2025-11-25's tool-name limit) and the prompt. */
const textLimitOf: Record<string, number> = {
  tool: 128,
  method: 128,
  session: 128,
  claimed_session: 128,
  prompt: 16 * 1024,
};

export type Cut = Record<
  string,
  { length: number; sha256: string } | { items: number } | { keys: number } | { depth: true }
>;

/** A string cut to `limit` code units (never inside a surrogate pair) and marked `…`, or as it is. */
export function cutText(value: string, limit: number, path: string, cut: Cut): string {
  if (value.length <= limit) return value;
  cut[path] = { length: value.length, sha256: sha256Hex(value) };
  let end = limit;
  const last = value.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--; // a high surrogate whose pair would be cut off
  return `${value.slice(0, end)}…`;
}

/**
 * The details bounded, with `cut` (the record's own cut fields and the details') added as
 * `details.cut` when anything was cut. Plain JSON in, as normaliseEntry's canonical round trip
 * leaves it.
 */
export function boundDetails(details: Record<string, unknown>, cut: Cut): Record<string, unknown> {
  const own = { ...cut };
  const bounded = boundValue(details, '$.details', undefined, 0, cut) as Record<string, unknown>;
  const withCut = Object.keys(cut).length > 0 ? { ...bounded, cut } : bounded;
  if (Buffer.byteLength(canonicalJson(withCut)) <= maxDetailsBytes) return withCut;
  // Still too large: the top-level scalars only (who, what, which rule), the rest named by its hash.
  const original = canonicalJson(details);
  const fallback: Cut = { ...own, '$.details': { length: original.length, sha256: sha256Hex(original) } };
  const kept: Record<string, unknown> = {};
  const scalars = Object.keys(details)
    .sort()
    .filter((key) => key.length <= maxKeyLength && isScalar(details[key]));
  for (const key of scalars.slice(0, fallbackFields)) {
    const v = details[key];
    kept[key] =
      typeof v === 'string'
        ? cutText(v, Math.min(fallbackTextLimit, limitOf(key)), childPath('$.details', key), fallback)
        : v;
  }
  return { ...kept, cut: fallback };
}

function isScalar(v: unknown): boolean {
  return v === null || typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
}

function limitOf(key: string | undefined): number {
  return (key !== undefined && Object.hasOwn(textLimitOf, key) ? textLimitOf[key] : undefined) ?? detailTextLimit;
}

function boundValue(value: unknown, path: string, key: string | undefined, depth: number, cut: Cut): unknown {
  if (typeof value === 'string') return cutText(value, limitOf(key), path, cut);
  if (value === null || typeof value !== 'object') return value;
  if (depth >= maxDepth) {
    cut[path] = { depth: true };
    return Array.isArray(value) ? [] : {};
  }
  if (Array.isArray(value)) {
    if (value.length > maxItems) cut[path] = { items: value.length };
    return value.slice(0, maxItems).map((v, i) => boundValue(v, `${path}[${i}]`, key, depth + 1, cut));
  }
  const record = value as Record<string, unknown>;
  let keys = Object.keys(record).sort();
  if (keys.length > maxKeys) {
    cut[path] = { keys: keys.length };
    // Scalars first (method, tool, session, message…: what says who did what), then the rest.
    keys = [...keys.filter((k) => isScalar(record[k])), ...keys.filter((k) => !isScalar(record[k]))].slice(0, maxKeys);
  }
  const out: Record<string, unknown> = {};
  for (const k of keys) {
    const name = k.length > maxKeyLength ? `${k.slice(0, maxKeyLength)}…${sha256Hex(k).slice(0, 8)}` : k;
    Object.defineProperty(out, name, {
      value: boundValue(record[k], childPath(path, name), k, depth + 1, cut),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}
