/**
 * What the evaluation scores for a classifier: nothing when its label is not `secret` (the
 * shipped decision), else the secrets detectors' findings with their ids (for provider recall).
 */
import { DETECTORS } from '../../plugins/classify/patterns/catalog.ts';
import { TextView } from '../../plugins/classify/patterns/detector.ts';
import type { PredictSecrets } from './secrets-score.ts';

export function shippedPredict(classifier: { classifySync(text: string): { label: string } }): PredictSecrets {
  const detectors = DETECTORS.filter((d) => d.family === 'secrets');
  return (text) => {
    if (classifier.classifySync(text).label !== 'secret') return [];
    const view = new TextView(text);
    return detectors.flatMap((d) => d.find(view).map((f) => ({ start: f.start, end: f.end, detector: d.id })));
  };
}
