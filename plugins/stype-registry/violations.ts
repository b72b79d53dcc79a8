/**
 * ajv errors in the registry's words: JSON-path violations and config field names come from the
 * runtime (one implementation for every stage that reports schema errors).
 */
import type { ErrorObject } from 'ajv';
import { describeSchemaError, schemaFieldName, toViolations } from '../../runtime/index.ts';

export { toViolations };

/** Dotted field name for config problems (`schema.$id`, `qom_profiles[0]`). */
export const fieldName = schemaFieldName;

export function problemMessage(err: ErrorObject): string {
  return describeSchemaError(err);
}
