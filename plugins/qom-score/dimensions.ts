/**
 * The six QoM dimensions. Each maps a message (the SType payload: tool arguments, or params) to
 * a score in [0, 1] with a one-line explanation, deterministically: the same message against
 * the same schema always scores the same. docs/enforcement.md describes the same rules.
 */
import type { Violation } from '../../runtime/index.ts';
import {
  longStringChars,
  longStringPenalty,
  placeholderPattern,
  placeholderWords,
  riskPatterns,
  scanLimit,
} from './patterns.ts';
import { isObject, type JsonObject, nestedProperties, type SchemaInfo } from './schema-info.ts';

export const dimensionNames = [
  'completeness',
  'consistency',
  'specificity',
  'schema_conform',
  'safety',
  'relevance',
] as const;
export type DimensionName = (typeof dimensionNames)[number];

export interface ScoringInput {
  payload: unknown;
  schema: JsonObject;
  info: SchemaInfo;
  /** Schema validation of the payload (all errors), paths under `root`. */
  valid: boolean;
  violations: Violation[];
  /** `$.arguments` for tool calls, `$` otherwise. */
  root: string;
}

export interface DimensionScore {
  score: number;
  why: string;
}

/** Nesting below this depth is not looked into (and counts as fine). */
const maxDepth = 4;
/** At most this many values are looked at per message, whatever its size. */
const maxNodes = 2000;
/** Share of completeness carried by required properties; optional ones carry the rest. */
const requiredShare = 0.8;

export const scorers: Record<DimensionName, (input: ScoringInput) => DimensionScore> = {
  /**
   * completeness = 0.8 × (required properties present / required) + 0.2 × (optional present /
   * optional). A kind the schema does not declare counts as fully present. Present = not
   * missing and not null.
   */
  completeness({ payload, info }) {
    const obj = isObject(payload) ? payload : {};
    let req = 0;
    let opt = 0;
    for (const p of info.properties.values()) {
      if (!present(own(obj, p.name))) continue;
      if (p.required) req++;
      else opt++;
    }
    const reqRatio = info.required ? req / info.required : 1;
    const optRatio = info.optional ? opt / info.optional : 1;
    return {
      score: requiredShare * reqRatio + (1 - requiredShare) * optRatio,
      why: `${req}/${info.required} required and ${opt}/${info.optional} optional properties present`,
    };
  },

  /**
   * consistency = passed checks / checks. One check per declared property present: it passes
   * when no schema violation (type, enum, const, format, range...) lies at or under it. One
   * check per ordered pair of declared properties (min/max, start/end, from/to...) whose two
   * values are both numbers or both ISO dates: it passes when low ≤ high. No checks: 1.
   */
  consistency({ payload, info, violations, root }) {
    const obj = isObject(payload) ? payload : {};
    const faulty = new Set<string>();
    for (const v of violations) {
      const field = topField(v.path, root);
      if (field !== undefined) faulty.add(field);
    }
    let checks = 0;
    let passed = 0;
    const issues: string[] = [];
    for (const p of info.properties.values()) {
      if (!present(own(obj, p.name))) continue;
      checks++;
      if (faulty.has(p.name)) issues.push(`${childPath(root, p.name)} disagrees with its declaration`);
      else passed++;
    }
    for (const [low, high] of info.orderedPairs) {
      const order = compare(own(obj, low), own(obj, high));
      if (order === undefined) continue;
      checks++;
      if (order <= 0) passed++;
      else issues.push(`${low} is greater than ${high}`);
    }
    if (checks === 0) return { score: 1, why: 'nothing to cross-check' };
    return {
      score: passed / checks,
      why: `${passed}/${checks} checks agree` + (issues.length ? `; ${issues.slice(0, 5).join('; ')}` : ''),
    };
  },

  /**
   * specificity = mean over the values present of: empty string, empty array/object or null 0;
   * placeholder (test, foo, xxx, lorem ipsum, n/a, aaaa...) 0.1; equal to the schema's
   * `default` or one of its `examples` 0.5; a string shorter than expected (3 characters, or a
   * tenth of its maxLength between 3 and 20) 0.5 + 0.5 × length / expected; otherwise 1.
   * Arrays and objects score the mean of their items; booleans are not judged. No values: 1.
   */
  specificity({ payload, info, schema, root }) {
    const budget = { nodes: maxNodes };
    const issues: string[] = [];
    const scores: number[] = [];
    if (isObject(payload)) {
      for (const [key, value] of Object.entries(payload)) {
        const sub = info.properties.get(key)?.schema ?? {};
        const s = specificityOf(value, sub, schema, childPath(root, key), 1, budget, issues);
        if (s !== undefined) scores.push(s);
      }
    }
    if (scores.length === 0) return { score: 1, why: 'no values to judge' };
    return {
      score: mean(scores),
      why: `${scores.length} values judged` + (issues.length ? `; vague: ${issues.slice(0, 5).join(', ')}` : ''),
    };
  },

  /** schema_conform = 1 when valid, else 1 − violations / constraints in the schema (floor 0). */
  schema_conform({ valid, violations, info }) {
    if (valid) return { score: 1, why: 'valid against the schema' };
    const n = Math.max(1, violations.length);
    return {
      score: Math.max(0, 1 - n / info.constraints),
      why: `${n} violations of ${info.constraints} schema constraints`,
    };
  },

  /**
   * safety = 1 − Σ penalties (floor 0), over every string value: a secret-like value (cloud or
   * API keys, private keys, tokens, `password=...`) 0.5; shell injection (backticks, `$(...)`,
   * `; rm`, `&& curl`...) 0.25; path traversal (`../../`, /etc/passwd) 0.25; prompt injection
   * ("ignore previous instructions") 0.25; control characters 0.25; a string over 8192
   * characters 0.25. Each kind counts once per value.
   */
  safety({ payload, root }) {
    const findings: string[] = [];
    let penalty = 0;
    forEachString(payload, root, { nodes: maxNodes }, (value, path) => {
      const text = value.length > scanLimit ? value.slice(0, scanLimit) : value;
      const kinds = new Set<string>();
      for (const risk of riskPatterns) {
        if (kinds.has(risk.kind) || !risk.pattern.test(text)) continue;
        kinds.add(risk.kind);
        penalty += risk.penalty;
        findings.push(`${risk.kind} at ${path}`);
      }
      if (value.length > longStringChars) {
        penalty += longStringPenalty;
        findings.push(`very long string at ${path}`);
      }
    });
    if (findings.length === 0) return { score: 1, why: 'no risky content found' };
    return { score: Math.max(0, 1 - penalty), why: findings.slice(0, 5).join('; ') };
  },

  /**
   * relevance = keys the SType declares / keys present, counted at every level where the schema
   * declares properties. A level whose schema is a map (additionalProperties or
   * patternProperties as a schema) accepts any key. No keys: 1.
   */
  relevance({ payload, schema, root }) {
    const tally = { known: 0, total: 0, unknown: [] as string[], nodes: maxNodes };
    countKeys(payload, schema, schema, root, 1, tally);
    if (tally.total === 0) return { score: 1, why: 'no properties to judge' };
    return {
      score: tally.known / tally.total,
      why:
        `${tally.known}/${tally.total} properties are declared by the SType` +
        (tally.unknown.length ? `; unknown: ${tally.unknown.slice(0, 5).join(', ')}` : ''),
    };
  },
};

function specificityOf(
  value: unknown,
  sub: JsonObject,
  root: JsonObject,
  path: string,
  depth: number,
  budget: { nodes: number },
  issues: string[],
): number | undefined {
  if (--budget.nodes < 0 || depth > maxDepth) return undefined;
  if (value === null) return note(issues, path, 'null', 0);
  if (typeof value === 'boolean') return undefined;
  if (typeof value === 'number') {
    return looksDefault(value, sub) ? note(issues, path, 'default value', 0.5) : 1;
  }
  if (typeof value === 'string') {
    const text = value.trim();
    if (text === '') return note(issues, path, 'empty', 0);
    if (placeholderWords.has(text.toLowerCase()) || placeholderPattern.test(text)) {
      return note(issues, path, 'placeholder', 0.1);
    }
    if (looksDefault(value, sub)) return note(issues, path, 'default value', 0.5);
    const maxLength = typeof sub.maxLength === 'number' ? sub.maxLength : undefined;
    const expected = maxLength ? Math.min(20, Math.max(3, Math.round(maxLength / 10))) : 3;
    if (text.length < expected) return note(issues, path, 'short', 0.5 + (0.5 * text.length) / expected);
    return 1;
  }
  if (Array.isArray(value)) {
    if (value.length === 0) return note(issues, path, 'empty', 0);
    const items = isObject(sub.items) ? sub.items : {};
    const scores: number[] = [];
    value.forEach((item, i) => {
      const s = specificityOf(item, items, root, `${path}[${i}]`, depth + 1, budget, issues);
      if (s !== undefined) scores.push(s);
    });
    return scores.length ? mean(scores) : undefined;
  }
  if (isObject(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) return note(issues, path, 'empty', 0);
    const props = nestedProperties(sub, root);
    const scores: number[] = [];
    for (const [key, v] of entries) {
      const s = specificityOf(v, props?.get(key) ?? {}, root, childPath(path, key), depth + 1, budget, issues);
      if (s !== undefined) scores.push(s);
    }
    return scores.length ? mean(scores) : undefined;
  }
  return undefined;
}

function looksDefault(value: unknown, sub: JsonObject): boolean {
  if (sub.default !== undefined && sub.default === value) return true;
  return Array.isArray(sub.examples) && sub.examples.includes(value);
}

function note(issues: string[], path: string, reason: string, score: number): number {
  issues.push(`${path} (${reason})`);
  return score;
}

function countKeys(
  value: unknown,
  sub: JsonObject,
  root: JsonObject,
  path: string,
  depth: number,
  tally: { known: number; total: number; unknown: string[]; nodes: number },
): void {
  if (!isObject(value) || depth > maxDepth) return;
  const props = nestedProperties(sub, root);
  const isMap = isObject(sub.additionalProperties) || isObject(sub.patternProperties);
  for (const [key, v] of Object.entries(value)) {
    if (--tally.nodes < 0) return;
    tally.total++;
    const declared = props?.get(key);
    if (declared || isMap) tally.known++;
    else tally.unknown.push(childPath(path, key));
    if (declared) countKeys(v, declared, root, childPath(path, key), depth + 1, tally);
  }
}

function forEachString(
  value: unknown,
  path: string,
  budget: { nodes: number },
  visit: (s: string, path: string) => void,
  depth = 0,
): void {
  if (--budget.nodes < 0 || depth > maxDepth + 4) return;
  if (typeof value === 'string') visit(value, path);
  else if (Array.isArray(value)) {
    for (const [i, v] of value.entries()) forEachString(v, `${path}[${i}]`, budget, visit, depth + 1);
  } else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) forEachString(v, childPath(path, k), budget, visit, depth + 1);
  }
}

/** -1 / 0 / 1 when both values are numbers or both ISO dates; undefined otherwise. */
function compare(a: unknown, b: unknown): number | undefined {
  if (typeof a === 'number' && typeof b === 'number' && Number.isFinite(a) && Number.isFinite(b)) {
    return Math.sign(a - b);
  }
  if (typeof a === 'string' && typeof b === 'string' && isoDate.test(a) && isoDate.test(b)) {
    const x = Date.parse(a);
    const y = Date.parse(b);
    if (Number.isFinite(x) && Number.isFinite(y)) return Math.sign(x - y);
  }
  return undefined;
}
const isoDate = /^\d{4}-\d{2}-\d{2}/;

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/** Same path form as the registry's violations: `.name`, or `["odd name"]`. */
export function childPath(base: string, key: string): string {
  return identifier.test(key) ? `${base}.${key}` : `${base}[${JSON.stringify(key)}]`;
}

/** The top-level property a violation path points into, relative to `root`. */
function topField(path: string, root: string): string | undefined {
  if (!path.startsWith(root)) return undefined;
  const rest = path.slice(root.length);
  const dotted = /^\.([A-Za-z_$][A-Za-z0-9_$]*)/.exec(rest);
  if (dotted) return dotted[1];
  const quoted = /^\[("(?:[^"\\]|\\.)*")\]/.exec(rest);
  return quoted ? (JSON.parse(quoted[1]) as string) : undefined;
}

function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function mean(xs: number[]): number {
  let sum = 0;
  for (const x of xs) sum += x;
  return sum / xs.length;
}
