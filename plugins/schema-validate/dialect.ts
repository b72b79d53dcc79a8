/**
 * The JSON Schema dialect of a tool schema (MCP 2025-11-25 and 2026-07-28, "JSON Schema Usage"):
 * 2020-12 when the schema names none, the one its `$schema` names otherwise. This gateway
 * supports 2020-12 and draft-07; any other `$schema` is refused, with the list, rather than read
 * under rules it was not written for.
 */
export type Dialect = '2020-12' | 'draft-07';

export const supportedDialects = [
  'https://json-schema.org/draft/2020-12/schema',
  'http://json-schema.org/draft-07/schema#',
] as const;

const known: Record<string, Dialect> = {
  'json-schema.org/draft/2020-12/schema': '2020-12',
  'json-schema.org/draft-07/schema': 'draft-07',
};

/** The dialect a schema's `$schema` names, or the reason it is refused. */
export function dialectOf(schema: unknown): { dialect: Dialect } | { problem: string } {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return { dialect: '2020-12' };
  const declared = (schema as Record<string, unknown>).$schema;
  if (declared === undefined) return { dialect: '2020-12' };
  if (typeof declared !== 'string') return { problem: '$schema must be a string (a dialect URI)' };
  // http or https, with or without the empty fragment: the same meta-schema.
  const bare = declared.replace(/^https?:\/\//, '').replace(/#$/, '');
  const dialect = known[bare];
  if (dialect) return { dialect };
  return {
    problem: `unsupported JSON Schema dialect ${JSON.stringify(declared)} (supported: ${supportedDialects.join(', ')})`,
  };
}
