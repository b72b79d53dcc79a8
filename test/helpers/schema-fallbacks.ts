/**
 * Finds code that repeats a schema default: `options.x ?? 30` (or `{ x = 30 } = options`) where
 * the options schema already says `x: { default: 30 }`. The runtime applies every schema default
 * before a plugin's `create` (runtime/config/options.ts), so such a fallback is dead code that
 * drifts from the schema the day one of them changes.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Each property name of a schema (at any depth) with the defaults it has there, as JSON text. */
export function schemaDefaults(schema: unknown, into = new Map<string, Set<string>>()): Map<string, Set<string>> {
  if (Array.isArray(schema)) {
    for (const s of schema) schemaDefaults(s, into);
    return into;
  }
  if (!schema || typeof schema !== 'object') return into;
  const s = schema as Record<string, unknown>;
  const properties = s.properties;
  if (properties && typeof properties === 'object' && !Array.isArray(properties)) {
    for (const [name, sub] of Object.entries(properties)) {
      if (sub && typeof sub === 'object' && 'default' in sub) {
        const set = into.get(name) ?? new Set<string>();
        set.add(JSON.stringify((sub as { default: unknown }).default));
        into.set(name, set);
      }
    }
  }
  for (const value of Object.values(s)) if (value && typeof value === 'object') schemaDefaults(value, into);
  return into;
}

/** A literal as the code writes it, as JSON text (undefined when it is not one we compare). */
function literalJson(code: string): string | undefined {
  const t = code.trim();
  if (t.startsWith('[') && t.length > 2) {
    const items = t.slice(1, -1).split(',').map(literalJson);
    return items.every((i) => i !== undefined) ? `[${items.join(',')}]` : undefined;
  }
  if (/^-?[0-9][0-9_]*(\.[0-9_]+)?(e-?[0-9]+)?$/i.test(t)) return JSON.stringify(Number(t.replaceAll('_', '')));
  if (/^'[^'\\]*'$/.test(t) || /^"[^"\\]*"$/.test(t)) return JSON.stringify(t.slice(1, -1));
  if (t === 'true' || t === 'false' || t === '[]' || t === '{}') return t;
  return undefined;
}

export interface Fallback {
  file: string;
  line: number;
  name: string;
  code: string;
}

const number = String.raw`-?[0-9][0-9_]*(?:\.[0-9_]+)?(?:e-?[0-9]+)?`;
/** An item of a list literal: a number, boolean or string without a comma. */
const item = String.raw`${number}|'[^'\\\n,]*'|"[^"\\\n,]*"|true|false`;
/** A number, string, boolean, `[]`, `{}`, or a list of items (`['name', 'description']`). */
const literal = String.raw`(${number}|'[^'\\\n]*'|"[^"\\\n]*"|true|false|\[\]|\{\}|\[\s*(?:${item})(?:\s*,\s*(?:${item}))*\s*\])`;
/**
 * A named constant (`DEFAULTS.pool_size`, `DEFAULT_MAX_CHUNKS`) as the fallback of an option that
 * has a schema default: the constant is not evaluated, and such a fallback is a repeated default.
 */
const constant = /([A-Za-z_$][\w$]*)['"]?\]?\s*\?\?\s*([A-Z][A-Z0-9_]*(?:\.[A-Za-z_$][\w$]*)?)(?![\w.(])/g;
/** `x.name ?? literal`, `x?.name ?? literal`, `name ?? literal`, `x['name'] ?? literal`. */
const nullish = new RegExp(String.raw`([A-Za-z_$][\w$]*)['"]?\]?\s*\?\?\s*${literal}(?![\w.])`, 'g');
/** A destructuring default: `{ name = literal }` / `, name = literal,`. */
const destructured = new RegExp(String.raw`[{,]\s*([A-Za-z_$][\w$]*)\s*=\s*${literal}\s*(?=[,}])`, 'g');

/** A fallback kept on purpose says so on its line or the line above: `not the schema default`. */
const exemption = /not the schema default/;

/** The fallbacks in the `.ts` files under `dir` (tests excluded) that equal a default of `defaults`. */
export function schemaFallbacks(dir: string, defaults: Map<string, Set<string>>, root = dir): Fallback[] {
  const found: Fallback[] = [];
  for (const file of tsFiles(dir)) {
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((text, i) => {
      if (exemption.test(text) || (i > 0 && exemption.test(lines[i - 1] ?? ''))) return;
      for (const re of [nullish, destructured]) {
        for (const m of text.matchAll(re)) {
          const name = m[1] as string;
          const value = literalJson(m[2] as string);
          if (value !== undefined && defaults.get(name)?.has(value)) {
            found.push({ file: relative(root, file), line: i + 1, name, code: text.trim() });
          }
        }
      }
      for (const m of text.matchAll(constant)) {
        const name = m[1] as string;
        if (defaults.has(name)) found.push({ file: relative(root, file), line: i + 1, name, code: text.trim() });
      }
    });
  }
  return found;
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir).sort()) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...tsFiles(path));
    else if (entry.endsWith('.ts') && !entry.endsWith('.test.ts')) out.push(path);
  }
  return out;
}
