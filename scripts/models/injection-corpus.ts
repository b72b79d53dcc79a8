/**
 * The labelled prompt-injection / jailbreak corpus: what the evaluation (bench/detect/injection.ts)
 * measures and the Tier B model (train-injection.ts) learns from.
 *
 * Two parts:
 * - **committed**: made here from this repository's own files, always available (CI): the
 *   hand-written set in data/prompt-injection/ and the seeded generators of
 *   injection-generators.ts fed with our own phrase lists;
 * - **public**: assembled by assemble-injection-data.ts from public repositories pinned by commit
 *   and SHA-256 (injection-sources.ts), cached under .data/ (not committed: nobody in this project
 *   wrote those texts), read from there when present.
 *
 * Every example has a split — train / val / test — decided by a hash of its source and group, so
 * that a group (a template, a frame, a system prompt) never straddles two splits, and adding a
 * source does not move the examples of another. Sources marked eval-only are all `test`.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadExamples } from './injection-dataset.ts';
import {
  generateActAs,
  generateCarrierTwins,
  generateChat,
  generateExtraction,
  generateHardNegatives,
  generateHijack,
  generateRoleplay,
  generateStructured,
  generateSuffix,
  OWN_GOALS,
} from './injection-generators.ts';
import { SeededRandom } from './seeded-random.ts';
import { generateWordSalad } from './word-salad-generators.ts';

export type Category =
  | 'jailbreak'
  | 'injection'
  | 'extraction'
  | 'roleplay_attack'
  | 'adversarial_suffix'
  | 'ordinary'
  | 'hard_negative';

export const POSITIVE_CATEGORIES: readonly Category[] = [
  'jailbreak',
  'injection',
  'extraction',
  'roleplay_attack',
  'adversarial_suffix',
];

export type Split = 'train' | 'val' | 'test';

export interface LabelledText {
  text: string;
  /** 1: an attack (injection or jailbreak), 0: benign. */
  label: 0 | 1;
  category: Category;
  source: string;
  group: string;
  split: Split;
}

export const ROOT = resolve(import.meta.dirname, '../..');
export const PUBLIC_CORPUS = join(ROOT, '.data/detect/injection/public.jsonl');
export const SPLIT_SALT = 'injection-corpus-v1';

/** Deterministic split of a group: 60 % train, 20 % val, 20 % test. */
export function splitOf(source: string, group: string, evalOnly = false): Split {
  if (evalOnly) return 'test';
  const h = createHash('sha256').update(`${SPLIT_SALT}\0${source}\0${group}`).digest();
  const u = h.readUInt32BE(0) / 2 ** 32;
  return u < 0.6 ? 'train' : u < 0.8 ? 'val' : 'test';
}

/**
 * Words that attacks use and that benign text uses too: a benign example containing one is a
 * hard negative, one without is ordinary.
 */
const TRIGGER =
  /\b(ignor\w*|disregard\w*|forget\w*|overrid\w*|bypass\w*|instructions?|system|prompts?|pretend\w*|act as|acting as|imagine you|you are (?:a|an|now)|role[- ]?play\w*|rules?|restrict\w*|jailbreak\w*|dan|developer mode|previous|above|reveal\w*|repeat\w*|unfiltered|uncensored|character)\b/i;

export function benignCategory(text: string): Category {
  return TRIGGER.test(text) ? 'hard_negative' : 'ordinary';
}

function example(
  text: string,
  label: 0 | 1,
  category: Category,
  source: string,
  group: string,
  evalOnly = false,
): LabelledText {
  return { text, label, category, source, group, split: splitOf(source, group, evalOnly) };
}

/** Rough category of a hand-written attack line. */
function attackCategory(text: string): Category {
  if (
    /\b(system prompt|instructions?|prompt)\b.*\b(reveal|print|show|repeat|output|verbatim)|\b(reveal|print|show|repeat|output)\b.*\b(system prompt|instructions|prompt)\b/i.test(
      text,
    )
  )
    return 'extraction';
  if (
    /\b(dan|jailbreak|developer mode|no restrictions|unrestricted|unfiltered|do anything now|pretend|act as|you are now)\b/i.test(
      text,
    )
  )
    return 'jailbreak';
  return 'injection';
}

/** Seeds and sizes of the committed generated sources. */
const GENERATED = {
  seed: 20250101,
  hijack: 300,
  extraction: 200,
  roleplay: 300,
  suffix: 300,
  hard: 400,
  twins: 200,
  chat: 400,
  structured: 300,
  salad: 1000,
  actAs: 400,
};

/** The committed part: always available, what the CI regression check runs on. */
export function committedCorpus(): LabelledText[] {
  const out: LabelledText[] = [];
  for (const e of loadExamples()) {
    const source = e.source === 'handwritten' ? 'repo-handwritten' : 'repo-templates';
    if (e.label === 'injection') out.push(example(e.text, 1, attackCategory(e.text), source, e.group));
    else out.push(example(e.text, 0, benignCategory(e.text), source, e.group));
  }
  const r = new SeededRandom(GENERATED.seed);
  for (const g of generateHijack(r, GENERATED.hijack)) out.push(example(g.text, 1, 'injection', 'gen-hijack', g.group));
  for (const g of generateExtraction(r, GENERATED.extraction))
    out.push(example(g.text, 1, 'extraction', 'gen-extraction', g.group));
  for (const g of generateRoleplay(r, OWN_GOALS, GENERATED.roleplay, 'own'))
    out.push(example(g.text, 1, 'roleplay_attack', 'gen-roleplay', g.group));
  for (const g of generateSuffix(r, OWN_GOALS, GENERATED.suffix, 'own'))
    out.push(example(g.text, 1, 'adversarial_suffix', 'gen-suffix', g.group));
  for (const g of generateHardNegatives(r, GENERATED.hard))
    out.push(example(g.text, 0, 'hard_negative', 'gen-hard-negatives', g.group));
  // Drawn last so that the sources above keep the texts they had before twins were added.
  for (const g of generateCarrierTwins(r, GENERATED.twins))
    out.push(example(g.text, 0, 'ordinary', 'gen-hijack-clean', g.group));
  // Background negatives (everyday chat, JSON / code / URLs): grouped per text, not per template,
  // so every split sees every template — they teach ordinary shapes, they do not test generalising.
  generateChat(r, GENERATED.chat).forEach((g, i) => {
    out.push(example(g.text, 0, benignCategory(g.text), 'gen-chat', `${g.group}:${i}`));
  });
  generateStructured(r, GENERATED.structured).forEach((g, i) => {
    out.push(example(g.text, 0, 'ordinary', 'gen-structured', `${g.group}:${i}`));
  });
  // Word salads, lorem ipsum, faker sentences, alone and around personal data, code and JSON
  // (word-salad-generators.ts): background negatives too, grouped per text.
  for (const g of generateWordSalad(r, GENERATED.salad))
    out.push(example(g.text, 0, benignCategory(g.text), 'gen-word-salad', g.group));
  for (const g of generateActAs(r, GENERATED.actAs))
    out.push(example(g.text, 0, 'hard_negative', 'gen-act-as', g.group));
  return dedupe(out);
}

/** The public part from .data/, or [] when it has not been assembled. */
export function publicCorpus(file = PUBLIC_CORPUS): LabelledText[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as LabelledText);
}

/** Both parts; the same text is kept once (first occurrence). */
export function loadCorpus(options: { publicFile?: string; publicPart?: boolean } = {}): LabelledText[] {
  const pub = options.publicPart === false ? [] : publicCorpus(options.publicFile);
  return dedupe([...committedCorpus(), ...pub]);
}

export function dedupe(items: LabelledText[]): LabelledText[] {
  const seen = new Set<string>();
  return items.filter((e) => {
    const key = e.text.trim();
    if (key === '' || seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

export { example as labelled };
