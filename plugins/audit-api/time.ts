/**
 * `start` / `end` query values: an ISO 8601 date (`2024-05-01`) or date-time
 * (`2024-05-01T10:00`, `...T10:00:00.123Z`, `...T12:00:00+02:00`; no offset means UTC).
 * A range is start ≤ timestamp ≤ end; a date-only end covers its whole day.
 */
const iso = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;

export interface Instant {
  /** Milliseconds since the epoch. */
  ms: number;
  dateOnly: boolean;
}

/** Parses a date or date-time; undefined when it is not one (or not a real calendar date). */
export function parseInstant(text: string): Instant | undefined {
  const m = iso.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = m;
  const [year, month, day] = [Number(y), Number(mo), Number(d)];
  const date = new Date(Date.UTC(year, month - 1, day));
  // Date.UTC rolls 2024-02-30 over to March: refuse what is not a calendar date.
  if (date.getUTCFullYear() !== year || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return undefined;
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 59) return undefined;
  const offset = zone.toUpperCase() === 'Z' ? 'Z' : zone.replace(/^([+-]\d{2}):?(\d{2})$/, '$1:$2');
  const ms = Date.parse(`${y}-${mo}-${d}T${h}:${mi}:${s}.${frac.padEnd(3, '0').slice(0, 3)}${offset}`);
  if (Number.isNaN(ms)) return undefined;
  return { ms, dateOnly: m[4] === undefined };
}

/** The first instant after an `end` value: the next day for a date, the next millisecond otherwise. */
export function exclusiveEnd(end: Instant): number {
  return end.ms + (end.dateOnly ? 86_400_000 : 1);
}
