/**
 * Public contract of the audit-chain resource: a hash-chained, append-only record of decisions.
 * Other plugins (the `audit` stage, audit-api, stream filters) import this file only.
 */

/** What a caller appends; the chain adds id, timestamp, prev_hash and hash. */
export interface AuditEntry {
  request_id: string;
  /** `allow`, `block`, `redact` or `flag` (the safety filter's vocabulary); any non-empty string. */
  action: string;
  tenant?: string;
  rule?: string;
  regulation?: string;
  /** `ingress`, `egress`... */
  phase?: string;
  /** Machine-readable facts (scores, spans masked, bytes of a stream scanned); JSON only. */
  details?: Record<string, unknown>;
}

/**
 * A stored record. Every field is a string (absent values are `""`) except `details`.
 * `hash = sha256hex(prev_hash + canonicalJson(record without hash))`; the first record's
 * `prev_hash` is GENESIS_HASH.
 */
export interface AuditRecord {
  /** Position in the chain as a decimal string: "1", "2", ... (gapless, increasing). */
  id: string;
  /** ISO 8601 UTC with milliseconds; never earlier than the previous record's. */
  timestamp: string;
  request_id: string;
  tenant: string;
  action: string;
  rule: string;
  regulation: string;
  phase: string;
  details: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** `prev_hash` of the first record: 64 zeros. */
export const GENESIS_HASH = '0'.repeat(64);

/** The `chain` option of the stages that use a chain (audit, audit-api): one declaration. */
export const chainOption = {
  type: 'string',
  minLength: 1,
  default: 'audit',
  'x-ref': 'resource',
  description: 'Name of the audit-chain resource',
} as const;

export interface AuditQuery {
  /** ISO 8601 timestamp: records at or after it. */
  start?: string;
  /** ISO 8601 timestamp: records strictly before it. */
  end?: string;
  limit?: number;
  offset?: number;
  tenant?: string;
  action?: string;
}

export interface AuditPage {
  /** In chain order (oldest first). */
  records: AuditRecord[];
  /** Records matching the filters, all pages together. */
  total: number;
}

export interface VerifyRange {
  /** ISO 8601 timestamp: verify from the first record at or after it. */
  start?: string;
  /** ISO 8601 timestamp: up to the last record strictly before it. */
  end?: string;
}

export interface VerifyResult {
  status: 'valid' | 'broken';
  /** Records checked and found intact (those before the break, when broken). */
  records_verified: number;
  chain_intact: boolean;
  /** Stored hash of the first record checked (`""` when there is none). */
  first_hash: string;
  /** Stored hash of the last record found intact (`""` when there is none). */
  last_hash: string;
  /** Where the chain breaks: the first record whose own hash or whose link to its predecessor fails. */
  broken_at?: { id: string; reason: 'hash_mismatch' | 'prev_hash_mismatch' };
}

export interface AuditSettings {
  backend: 'sqlite' | 'postgres';
  table: string;
  /** What the `audit` stage records: decisions other than allow (default), or all. */
  record: 'non-allow' | 'all';
  /** Whether the `audit` stage stores the request's prompt in `details.prompt`. */
  store_prompt: boolean;
}

export interface AuditChain {
  readonly settings: AuditSettings;
  /** Appends one record; resolves after the commit (durable), rejects if it did not happen. */
  append(entry: AuditEntry): Promise<AuditRecord>;
  /** Appends several records as one atomic commit, in order. */
  appendAll(entries: readonly AuditEntry[]): Promise<AuditRecord[]>;
  query(query?: AuditQuery): Promise<AuditPage>;
  verify(range?: VerifyRange): Promise<VerifyResult>;
}
