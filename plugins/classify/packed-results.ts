/**
 * Classifier results as they cross from the set's worker thread (set-worker.ts) to the main
 * thread: each result's spans packed into typed arrays. Cloning a message costs per object: a
 * 4 MB text with a finding in every sentence (130 000 spans) took ~40 ms of the main thread to
 * receive as span objects, which held every other request; as two typed arrays and a short list of
 * labels it is a copy of bytes, and the objects are made again in one tight loop.
 */
import type { ClassifierResult, Span } from './api.ts';

export interface PackedResult {
  /** The result without its spans. */
  result: Omit<ClassifierResult, 'spans'>;
  /** start, end of each span. */
  bounds: Int32Array;
  /** Per span, its label's index in `labels`. */
  labelOf: Uint16Array;
  labels: string[];
}

export function packResult(r: ClassifierResult): PackedResult {
  const { spans, ...result } = r;
  const bounds = new Int32Array(2 * spans.length);
  const labelOf = new Uint16Array(spans.length);
  const labels: string[] = [];
  const index = new Map<string, number>();
  for (let i = 0; i < spans.length; i++) {
    const s = spans[i];
    bounds[2 * i] = s.start;
    bounds[2 * i + 1] = s.end;
    let k = index.get(s.label);
    if (k === undefined) {
      k = labels.push(s.label) - 1;
      index.set(s.label, k);
    }
    labelOf[i] = k;
  }
  return { result, bounds, labelOf, labels };
}

export function unpackResult(p: PackedResult): ClassifierResult {
  const spans = new Array<Span>(p.labelOf.length);
  for (let i = 0; i < spans.length; i++) {
    spans[i] = { start: p.bounds[2 * i], end: p.bounds[2 * i + 1], label: p.labels[p.labelOf[i]] };
  }
  return { ...p.result, spans } as ClassifierResult;
}
