/**
 * Scoring of secret findings against the labelled items of secrets-generate.ts (shared by the
 * bench runner and the CI regression test). A secret counts as found when findings cover at least
 * half of it, and as found with its provider when a finding of the detector named by its group
 * overlaps it. A text without a secret counts as flagged when any finding is reported on it.
 */
import type { Item, Kind } from './secrets-generate.ts';

export interface Found {
  start: number;
  end: number;
  detector: string;
}
export type PredictSecrets = (text: string) => Found[];

export interface Rate {
  total: number;
  hit: number;
  rate: number;
}
export interface SecretScores {
  kinds: Record<Kind, Rate>;
  /** Per detector id: secrets found (any finding), found with that detector. */
  providers: Record<string, { provider: string; total: number; found: number; withProvider: number }>;
  /** Per near-miss way, placeholder way and hard-negative kind: how many were flagged. */
  groups: Record<string, Rate>;
  missed: string[];
  flagged: string[];
}

const rate = (): Rate => ({ total: 0, hit: 0, rate: 0 });

export function evaluateSecrets(items: Item[], predict: PredictSecrets): SecretScores {
  const kinds = {
    bare: rate(),
    assigned: rate(),
    near_miss: rate(),
    placeholder: rate(),
    hard_negative: rate(),
  } as Record<Kind, Rate>;
  const providers: SecretScores['providers'] = {};
  const groups: Record<string, Rate> = {};
  const missed: string[] = [];
  const flagged: string[] = [];
  for (const item of items) {
    const found = predict(item.text);
    const k = kinds[item.kind];
    k.total++;
    if (item.kind === 'bare' || item.kind === 'assigned') {
      const gold = item.spans[0] as { start: number; end: number };
      let covered = 0;
      for (let i = gold.start; i < gold.end; i++) if (found.some((f) => f.start <= i && i < f.end)) covered++;
      const hit = covered * 2 >= gold.end - gold.start;
      const withProvider = found.some((f) => f.detector === item.group && f.start < gold.end && f.end > gold.start);
      providers[item.group] ??= { provider: item.provider ?? '', total: 0, found: 0, withProvider: 0 };
      const p = providers[item.group] as SecretScores['providers'][string];
      p.total++;
      if (hit) {
        k.hit++;
        p.found++;
      } else missed.push(`${item.group}: ${JSON.stringify(item.text)}`);
      if (withProvider) p.withProvider++;
    } else {
      const group =
        item.kind === 'hard_negative' ? item.group : `${item.kind}:${item.group.split(':')[1] ?? item.group}`;
      groups[group] ??= rate();
      const g = groups[group] as Rate;
      g.total++;
      if (found.length > 0) {
        k.hit++;
        g.hit++;
        flagged.push(
          `${item.kind} ${item.group} [${found.map((f) => f.detector).join(',')}]: ${JSON.stringify(item.text)}`,
        );
      }
    }
  }
  for (const r of [...Object.values(kinds), ...Object.values(groups)]) r.rate = r.total ? r.hit / r.total : 0;
  return { kinds, providers, groups, missed, flagged };
}
