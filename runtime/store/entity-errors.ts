/**
 * The entity store's failures, as GatewayErrors so that a service's dialect renders them
 * (never a 500 for a caller's mistake). Each carries a stable `code` and structured `details`.
 */
import { GatewayError } from '../errors.ts';

/** An optimistic mutation found another version than expected: 409 `version_conflict`. */
export class VersionConflictError extends GatewayError {
  constructor(
    readonly entityType: string,
    readonly entityId: number,
    readonly expectedVersion: number,
    /** Null when the entity is gone. */
    readonly actualVersion: number | null,
  ) {
    super(
      'conflict',
      actualVersion === null
        ? `${entityType} ${entityId} no longer exists (expected version ${expectedVersion})`
        : `${entityType} ${entityId} is at version ${actualVersion}, not ${expectedVersion}`,
      {
        code: 'version_conflict',
        details: { type: entityType, id: entityId, expected_version: expectedVersion, actual_version: actualVersion },
      },
    );
    this.name = 'VersionConflictError';
  }
}

export type QueryBudget = 'max_entities' | 'max_depth';

/**
 * A query asked for more than the store allows (`query.max_entities`, `query.max_depth`): 400
 * `query_budget_exceeded`. A 400 because the caller can fix it (smaller page, shallower expand).
 */
export class QueryBudgetExceededError extends GatewayError {
  constructor(
    readonly budget: QueryBudget,
    readonly limit: number,
    readonly requested: number,
  ) {
    super('bad_request', `query exceeds ${budget} (${requested} > ${limit})`, {
      code: 'query_budget_exceeded',
      details: { budget, limit, requested },
    });
    this.name = 'QueryBudgetExceededError';
  }
}

/** A mutation on a store set read-only (a replica): 403 `read_only`, the reason in the message. */
export class ReadOnlyStoreError extends GatewayError {
  constructor(readonly reason: string) {
    super('forbidden', `the store is read-only: ${reason}`, { code: 'read_only', details: { reason } });
    this.name = 'ReadOnlyStoreError';
  }
}

/** A malformed filter, order, field path, paging value or entity argument: 400 `invalid_query`. */
export class InvalidQueryError extends GatewayError {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super('bad_request', message, { code: 'invalid_query', details: { field } });
    this.name = 'InvalidQueryError';
  }
}

/** `create` with a key its type already has: 409 `duplicate_key` (use `upsertByKey` to replace). */
export class DuplicateKeyError extends GatewayError {
  constructor(
    readonly entityType: string,
    readonly key: string,
  ) {
    super('conflict', `${entityType} with key "${key}" already exists`, {
      code: 'duplicate_key',
      details: { type: entityType, key },
    });
    this.name = 'DuplicateKeyError';
  }
}

/**
 * `applyChange` got a record past the next expected seq: applying it would lose the ones between.
 * 409 `replication_gap`; the replica should fetch `changesSince(expected_seq - 1)` again.
 */
export class ReplicationGapError extends GatewayError {
  constructor(
    readonly expectedSeq: number,
    readonly seq: number,
  ) {
    super('conflict', `change ${seq} arrived before change ${expectedSeq}`, {
      code: 'replication_gap',
      details: { expected_seq: expectedSeq, seq },
    });
    this.name = 'ReplicationGapError';
  }
}

/**
 * The database did not keep up: no pooled connection (or no write slot of the store's queue)
 * became free in time. 503 `storage_busy` with `Retry-After: 1`: a transient condition, so the
 * client should try again shortly rather than see a 500.
 */
export class StorageBusyError extends GatewayError {
  constructor(reason: string, cause?: unknown) {
    super('unavailable', 'The database is busy, try again shortly', {
      code: 'storage_busy',
      details: { reason },
      headers: { 'Retry-After': '1' },
      cause,
    });
    this.name = 'StorageBusyError';
  }
}

/**
 * A transaction lost to concurrent writers in a way no version names (PostgreSQL: a deadlock, a
 * serialization failure, a lock it would not wait for) and had no retry left: 409
 * `write_conflict`. Nothing of it was written; running it again is safe.
 */
export class WriteConflictError extends GatewayError {
  constructor(cause: unknown) {
    const sqlstate = (cause as { code?: unknown })?.code;
    super('conflict', 'The transaction collided with concurrent writers and was rolled back: try again', {
      code: 'write_conflict',
      details: { sqlstate: typeof sqlstate === 'string' ? sqlstate : null },
      cause,
    });
    this.name = 'WriteConflictError';
  }
}
