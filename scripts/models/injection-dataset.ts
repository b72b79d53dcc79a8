/**
 * The prompt-injection data set shipped in data/prompt-injection/: hand-written examples
 * (injection.txt, benign.txt) plus templated ones (templates.json, expanded here with a fixed
 * seed), and the held-out split. Splitting is by group — each hand-written line is its own group,
 * each template is one group — so no template has expansions on both sides of the split.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { SeededRandom } from './seeded-random.ts';

export const LABELS = ['benign', 'injection'] as const;
export type Label = (typeof LABELS)[number];

export interface Example {
  text: string;
  label: Label;
  source: 'handwritten' | 'template';
  group: string;
}

export const DATA_DIR = resolve(import.meta.dirname, '../../data/prompt-injection');
export const EXPANSIONS_PER_TEMPLATE = 10;
export const TEST_FRACTION = 0.2;
export const SPLIT_SEED = 20240611;
const TEMPLATE_SEED = 7;

function readLines(file: string): string[] {
  return readFileSync(join(DATA_DIR, file), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '' && !line.startsWith('#'))
    .map((line) => line.replaceAll('\\n', '\n'));
}

interface Templates {
  slots: Record<string, string[]>;
  injection: string[];
  benign: string[];
}

/** Fills `{slot}` (also `{slot_lower}` / `{slot_cap}`: first letter lower/upper-cased), one value per slot per expansion. */
export function expandTemplate(template: string, slots: Record<string, string[]>, random: SeededRandom): string {
  const chosen = new Map<string, string>();
  return template.replace(/\{(\w+?)(_lower|_cap)?\}/g, (_, slot: string, modifier?: string) => {
    const values = slots[slot];
    if (!values) throw new Error(`template slot {${slot}} is not defined in templates.json`);
    if (!chosen.has(slot)) chosen.set(slot, random.pick(values));
    const value = chosen.get(slot)!;
    if (modifier === '_lower') return value[0].toLowerCase() + value.slice(1);
    if (modifier === '_cap') return value[0].toUpperCase() + value.slice(1);
    return value;
  });
}

export function loadExamples(): Example[] {
  const examples: Example[] = [];
  for (const label of LABELS) {
    readLines(`${label}.txt`).forEach((text, i) => {
      examples.push({ text, label, source: 'handwritten', group: `${label}.txt:${i + 1}` });
    });
  }
  const templates = JSON.parse(readFileSync(join(DATA_DIR, 'templates.json'), 'utf8')) as Templates;
  const random = new SeededRandom(TEMPLATE_SEED);
  for (const label of LABELS) {
    templates[label].forEach((template, t) => {
      const texts = new Set<string>();
      for (let attempt = 0; attempt < 100 && texts.size < EXPANSIONS_PER_TEMPLATE; attempt++) {
        texts.add(expandTemplate(template, templates.slots, random));
      }
      for (const text of texts)
        examples.push({ text, label, source: 'template', group: `templates.json:${label}[${t}]` });
    });
  }
  // The same text must not appear twice (it could land on both sides of the split).
  const seen = new Set<string>();
  return examples.filter((e) => !seen.has(e.text) && seen.add(e.text));
}

/** Held-out split by group, stratified by label and source, with a fixed seed. */
export function splitExamples(examples: Example[], seed = SPLIT_SEED): { train: Example[]; test: Example[] } {
  const random = new SeededRandom(seed);
  const testGroups = new Set<string>();
  for (const label of LABELS) {
    for (const source of ['handwritten', 'template'] as const) {
      const groups = [...new Set(examples.filter((e) => e.label === label && e.source === source).map((e) => e.group))];
      random.shuffle(groups);
      for (const g of groups.slice(0, Math.round(groups.length * TEST_FRACTION))) testGroups.add(g);
    }
  }
  return {
    train: examples.filter((e) => !testGroups.has(e.group)),
    test: examples.filter((e) => testGroups.has(e.group)),
  };
}

export function loadInjectionDataset(): { train: Example[]; test: Example[] } {
  return splitExamples(loadExamples());
}
