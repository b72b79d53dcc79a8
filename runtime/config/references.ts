/**
 * Cross-references in plugin options. A property whose value names something declared elsewhere
 * in the config carries `'x-ref': 'upstream' | 'resource' | 'route'` in its plugin's options
 * schema; the loader then checks the name against the config, so a typo is a config error at its
 * line instead of a failure when the graph is built. The loader knows no plugin: the schema says
 * which options are references, at any depth (`items`, nested objects...).
 */
import type { KeywordDefinition, SchemaValidateFunction } from 'ajv';

export const referenceKinds = ['upstream', 'resource', 'route'] as const;
export type ReferenceKind = (typeof referenceKinds)[number];

const declaredUnder: Record<ReferenceKind, string> = {
  upstream: 'upstreams:',
  resource: 'resources:',
  route: 'routes: (a route id)',
};

/** The names a config declares; passed as `this` to a validate function (ajv `passContext`). */
export class DeclaredNames {
  constructor(readonly names: Record<ReferenceKind, ReadonlySet<string>>) {}

  problem(kind: ReferenceKind, name: string): string | undefined {
    const known = this.names[kind];
    if (known.has(name)) return undefined;
    const list = [...known].map((n) => JSON.stringify(n)).join(', ');
    return `unknown ${kind} "${name}" (${list ? `declared: ${list}` : `none declared under ${declaredUnder[kind]}`})`;
  }
}

const checkReference: SchemaValidateFunction = function (this: unknown, kind: ReferenceKind, name: string) {
  // Without a DeclaredNames context (a schema validated on its own, e.g. in a plugin's tests) there
  // is nothing to check against.
  if (!(this instanceof DeclaredNames)) return true;
  const message = this.problem(kind, name);
  if (message === undefined) return true;
  checkReference.errors = [{ keyword: 'x-ref', message, params: { kind, name } }];
  return false;
};

/** The ajv keyword; register it with `ajv.addKeyword(referenceKeyword)`. */
export const referenceKeyword: KeywordDefinition = {
  keyword: 'x-ref',
  type: 'string',
  schemaType: 'string',
  metaSchema: { enum: [...referenceKinds] },
  errors: true,
  validate: checkReference,
};
