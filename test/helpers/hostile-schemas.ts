/**
 * Tool schemas that make a JSON Schema validator work hard, for the hostile-schema bench
 * (bench/typed-proxy/hostile-schema.ts) and the tests of schema-validate's bounds: each puts its
 * hostile part under one property (`property`, default `a`).
 */

/** An array whose every item is tried against `n` alternatives: ajv's compile grows with n. */
export function alternatives(n: number, property = 'a') {
  return {
    type: 'object',
    properties: {
      [property]: {
        type: 'array',
        items: { anyOf: Array.from({ length: n }, (_, i) => ({ type: 'object', required: [`k${i}`] })) },
      },
    },
  };
}

/** `$defs` where each level refers twice to the one below: 2^levels paths to the bottom. */
export function refExplosion(levels: number, property = 'a') {
  const defs: Record<string, unknown> = { l0: { type: 'string' } };
  for (let i = 1; i <= levels; i++)
    defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i - 1}` }, { $ref: `#/$defs/l${i - 1}` }] };
  return { type: 'object', $defs: defs, properties: { [property]: { $ref: `#/$defs/l${levels}` } } };
}
