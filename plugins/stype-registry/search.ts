/**
 * Full-text search over the registry: SType ids and names, descriptions, and schema content
 * (titles, descriptions, property names, enum values). The index (lower-cased field texts) is
 * built once at load.
 *
 * Scoring: each query term (whitespace-separated, case-insensitive) scores the weight of the best
 * field it occurs in, times 1 for a whole-word hit or 0.75 for a hit inside a word; an SType's
 * score is the mean over the query's terms, so it lies in [0, 1] and a result matching more of
 * the terms ranks higher. Ties go to the result with more matching fields, then to the id.
 */
import type { SearchMatch, SearchResult, STypeRecord } from './api.ts';

interface IndexedField {
  field: string;
  text: string;
  lower: string;
  weight: number;
}

interface IndexedSType {
  id: string;
  fields: IndexedField[];
}

export interface SearchIndex {
  entries: IndexedSType[];
}

const SNIPPET = 60;
const MAX_TERMS = 32;

const WEIGHT = {
  id: 1,
  description: 0.8,
  title: 0.7,
  property: 0.7,
  schemaText: 0.5,
  output: 0.4,
};

export function buildIndex(records: STypeRecord[]): SearchIndex {
  return { entries: records.map((r) => ({ id: r.id, fields: fieldsOf(r) })) };
}

function fieldsOf(r: STypeRecord): IndexedField[] {
  const out: IndexedField[] = [];
  const add = (field: string, text: unknown, weight: number) => {
    if (typeof text !== 'string' || text === '') return;
    out.push({ field, text, lower: text.toLowerCase(), weight });
  };
  add('stype', r.id, WEIGHT.id);
  add('description', r.description, WEIGHT.description);
  schemaFields(r.schema, 'schema', false, add);
  if (r.output_schema) schemaFields(r.output_schema, 'output_schema', true, add);
  return out;
}

type Add = (field: string, text: unknown, weight: number) => void;

/** Titles, descriptions, property names and string enum values, recursively through properties/items. */
function schemaFields(schema: Record<string, unknown>, at: string, output: boolean, add: Add): void {
  const w = (weight: number) => (output ? Math.min(weight, WEIGHT.output) : weight);
  add(`${at}.title`, schema.title, w(WEIGHT.title));
  add(`${at}.description`, schema.description, w(WEIGHT.schemaText));
  const values = [
    ...(Array.isArray(schema.enum) ? schema.enum : []),
    ...(schema.const !== undefined ? [schema.const] : []),
  ];
  const strings = values.filter((v): v is string => typeof v === 'string');
  if (strings.length > 0) add(`${at}.enum`, strings.join(', '), w(WEIGHT.schemaText));
  const props = schema.properties;
  if (props && typeof props === 'object') {
    for (const [name, sub] of Object.entries(props as Record<string, unknown>)) {
      const path = `${at}.properties.${name}`;
      add(path, name, w(WEIGHT.property));
      if (sub && typeof sub === 'object') schemaFields(sub as Record<string, unknown>, path, output, add);
    }
  }
  const items = schema.items;
  if (items && typeof items === 'object' && !Array.isArray(items)) {
    schemaFields(items as Record<string, unknown>, `${at}.items`, output, add);
  }
}

export function search(index: SearchIndex, query: string): SearchResult {
  const terms = [...new Set(query.toLowerCase().split(/\s+/).filter(Boolean))].slice(0, MAX_TERMS);
  const results: Array<{ stype: string; score: number; matches: SearchMatch[] }> = [];
  if (terms.length === 0) return { query, results, total: 0 };
  for (const entry of index.entries) {
    let sum = 0;
    const matched = new Map<string, SearchMatch>();
    for (const term of terms) {
      let best = 0;
      for (const f of entry.fields) {
        const at = f.lower.indexOf(term);
        if (at < 0) continue;
        const s = f.weight * (wholeWord(f.lower, at, term.length) ? 1 : 0.75);
        if (s > best) best = s;
        if (!matched.has(f.field)) matched.set(f.field, { field: f.field, snippet: snippet(f.text, at, term.length) });
      }
      sum += best;
    }
    if (matched.size === 0) continue;
    results.push({
      stype: entry.id,
      score: Math.round((sum / terms.length) * 1000) / 1000,
      matches: [...matched.values()],
    });
  }
  results.sort((a, b) => b.score - a.score || b.matches.length - a.matches.length || a.stype.localeCompare(b.stype));
  return { query, results, total: results.length };
}

const wordChar = /[a-z0-9]/;

function wholeWord(text: string, at: number, len: number): boolean {
  const before = at === 0 ? '' : text[at - 1];
  const after = text[at + len] ?? '';
  return !wordChar.test(before) && !wordChar.test(after);
}

/** About SNIPPET characters of the field around the hit, with ellipses where cut. */
function snippet(text: string, at: number, len: number): string {
  if (text.length <= SNIPPET) return text;
  const pad = Math.max(0, Math.floor((SNIPPET - len) / 2));
  let start = Math.max(0, at - pad);
  const end = Math.min(text.length, start + Math.max(SNIPPET, len));
  start = Math.max(0, end - Math.max(SNIPPET, len));
  // Start on a word boundary when one is near, rather than mid-word.
  const space = start > 0 ? text.indexOf(' ', start) : -1;
  if (space >= 0 && space < at && space - start < 12) start = space + 1;
  return `${start > 0 ? '…' : ''}${text.slice(start, end).trim()}${end < text.length ? '…' : ''}`;
}
