/**
 * Masking of flagged spans: overlapping spans (from several detectors or classifiers) are merged
 * first, so that each stretch of text is replaced once.
 */
import type { Span } from './api.ts';

/**
 * Spans clamped to the text, empty ones dropped, sorted, and overlapping ones merged. A merged
 * span keeps the label of the part that covers the most characters (the first on a tie).
 * Adjacent spans stay separate: `[EMAIL][PHONE]` says more than one placeholder.
 */
export function mergeSpans(spans: readonly Span[], textLength = Number.POSITIVE_INFINITY): Span[] {
  const clean = spans
    .map((s) => ({
      start: Math.max(0, Math.floor(s.start)),
      end: Math.min(textLength, Math.floor(s.end)),
      label: s.label,
    }))
    .filter((s) => s.end > s.start)
    .sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: Span[] = [];
  let widest = 0; // length of the widest part of the last merged span
  for (const s of clean) {
    const last = merged[merged.length - 1];
    if (last && s.start < last.end) {
      if (s.end - s.start > widest) {
        widest = s.end - s.start;
        last.label = s.label;
      }
      last.end = Math.max(last.end, s.end);
    } else {
      merged.push({ ...s });
      widest = s.end - s.start;
    }
  }
  return merged;
}

/** The text with every span replaced by its placeholder (`[EMAIL]` by default). */
export function redact(
  text: string,
  spans: readonly Span[],
  placeholder: (label: string) => string = (label) => `[${label}]`,
): string {
  const merged = mergeSpans(spans, text.length);
  if (merged.length === 0) return text;
  let out = '';
  let at = 0;
  for (const s of merged) {
    out += text.slice(at, s.start) + placeholder(s.label);
    at = s.end;
  }
  return out + text.slice(at);
}
