/**
 * The record format and its hash. A record is hashed as
 *
 *   hash = sha256hex(prev_hash + canonicalJson({id, timestamp, request_id, tenant, action, rule,
 *                                               regulation, phase, details, prev_hash}))
 *
 * where canonicalJson is JSON with object keys sorted recursively (runtime/util/hash.ts). Anyone
 * can recompute it from a record returned by `GET /audit`. The details column stores
 * canonicalJson(details), byte for byte what was hashed.
 */
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import type { AuditEntry, AuditRecord } from './api.ts';
import { boundDetails, type Cut, cutText, recordTextLimit } from './bounds.ts';

export type UnhashedRecord = Omit<AuditRecord, 'hash'>;

export function recordHash(record: UnhashedRecord): string {
  return hashFields(record, canonicalJson(record.details));
}

/**
 * The same hash from a record's text fields and its details already in canonical form (as
 * stored), without building an object: this is what makes verification fast. The keys below are
 * written in canonicalJson's (sorted) order, so the text is exactly canonicalJson(record).
 */
export function hashFields(r: Omit<UnhashedRecord, 'details'>, canonicalDetails: string): string {
  const q = JSON.stringify;
  const canonical =
    `{"action":${q(r.action)},"details":${canonicalDetails},"id":${q(r.id)},"phase":${q(r.phase)},` +
    `"prev_hash":${q(r.prev_hash)},"regulation":${q(r.regulation)},"request_id":${q(r.request_id)},` +
    `"rule":${q(r.rule)},"tenant":${q(r.tenant)},"timestamp":${q(r.timestamp)}}`;
  return sha256Hex(r.prev_hash + canonical);
}

/** The hash a stored row should have (its details column holds canonical JSON). */
export function rowHash(row: RecordRow): string {
  return hashFields({ ...row, id: String(row.seq) }, row.details);
}

/** Checks an entry and fills in the fields the chain does not compute ("" when absent). */
export function normaliseEntry(entry: AuditEntry): Omit<UnhashedRecord, 'id' | 'timestamp' | 'prev_hash'> {
  if (typeof entry.request_id !== 'string' || entry.request_id === '') {
    throw new TypeError('audit entry: request_id must be a non-empty string');
  }
  if (typeof entry.action !== 'string' || entry.action === '') {
    throw new TypeError('audit entry: action must be a non-empty string');
  }
  // Every field bounded (bounds.ts): what was cut is named in details.cut with its length and hash.
  const cut: Cut = {};
  const text = (v: unknown, field: string) =>
    cutText(typeof v === 'string' ? v : v == null ? '' : String(v), recordTextLimit, `$.${field}`, cut);
  const fields = {
    request_id: text(entry.request_id, 'request_id'),
    tenant: text(entry.tenant, 'tenant'),
    action: text(entry.action, 'action'),
    rule: text(entry.rule, 'rule'),
    regulation: text(entry.regulation, 'regulation'),
    phase: text(entry.phase, 'phase'),
  };
  // Round-trip through the canonical form so that the record holds exactly what is hashed.
  const details = JSON.parse(canonicalJson(entry.details ?? {})) as unknown;
  if (details === null || typeof details !== 'object' || Array.isArray(details)) {
    throw new TypeError('audit entry: details must be a JSON object');
  }
  return { ...fields, details: boundDetails(details as Record<string, unknown>, cut) };
}

/** A table row as the drivers return it (seq is a string from PostgreSQL, a number from SQLite). */
export interface RecordRow {
  seq: number | string;
  timestamp: string;
  request_id: string;
  tenant: string;
  action: string;
  rule: string;
  regulation: string;
  phase: string;
  details: string;
  prev_hash: string;
  hash: string;
}

export const rowColumns =
  'seq, timestamp, request_id, tenant, action, rule, regulation, phase, details, prev_hash, hash';

export function fromRow(row: RecordRow): AuditRecord {
  return {
    id: String(row.seq),
    timestamp: row.timestamp,
    request_id: row.request_id,
    tenant: row.tenant,
    action: row.action,
    rule: row.rule,
    regulation: row.regulation,
    phase: row.phase,
    details: parseDetails(row.details),
    prev_hash: row.prev_hash,
    hash: row.hash,
  };
}

/** Details as stored; a value that is not a JSON object (tampering) is kept as a string so its hash fails. */
function parseDetails(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text) as unknown;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {}
  return { unparseable: text };
}

export function toRow(record: AuditRecord): Array<string | number> {
  return [
    Number(record.id),
    record.timestamp,
    record.request_id,
    record.tenant,
    record.action,
    record.rule,
    record.regulation,
    record.phase,
    canonicalJson(record.details),
    record.prev_hash,
    record.hash,
  ];
}
