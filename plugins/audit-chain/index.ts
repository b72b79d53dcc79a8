/**
 * audit-chain: the hash-chained audit trail. Two definitions: the `audit-chain` resource (the
 * chain in SQLite or PostgreSQL) and the `audit` stage (records each request's decisions).
 * See docs/audit.md.
 */
import resource from './resource.ts';
import stage from './stage.ts';

export default [resource, stage];
