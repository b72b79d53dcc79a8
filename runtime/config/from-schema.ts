/**
 * The TypeScript type of a JSON Schema written `as const`: a plugin's options type is inferred from
 * its options schema, so the two cannot drift apart. The same contract as `FromSchema` of the
 * `json-schema-to-ts` package (a property with a `default` is present in the type, since the
 * runtime always applies defaults before `create`), for the part of JSON Schema that options
 * schemas use: `type` (one or a list), `const`, `enum`, `properties` / `required` / `default`,
 * `additionalProperties`, `items`, `oneOf` / `anyOf` / `allOf`. Anything else (`$ref`,
 * `patternProperties`, `if`/`then`) reads as `unknown`: the value is still validated, only not typed.
 *
 * Written here because no inference library is installed (json-schema-to-ts would replace it with
 * an import: same name, same meaning).
 */

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** The schema's own type, without its alternatives (`oneOf`/`anyOf`/`allOf` are applied on top). */
type Base<S> = S extends { const: infer C }
  ? Mutable<C>
  : S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { type: infer T }
      ? FromType<T, S>
      : S extends { properties: object }
        ? FromObject<S>
        : S extends { items: object }
          ? FromArray<S>
          : unknown;

type Mutable<T> = T extends readonly (infer E)[]
  ? Mutable<E>[]
  : T extends object
    ? { -readonly [K in keyof T]: Mutable<T[K]> }
    : T;

type FromType<T, S> = T extends readonly (infer U)[]
  ? FromType<U, S>
  : T extends 'string'
    ? string
    : T extends 'number' | 'integer'
      ? number
      : T extends 'boolean'
        ? boolean
        : T extends 'null'
          ? null
          : T extends 'array'
            ? FromArray<S>
            : T extends 'object'
              ? FromObject<S>
              : unknown;

type FromArray<S> = S extends { items: infer I } ? FromSchema<I>[] : unknown[];

type Properties<S> = S extends { properties: infer P } ? P : {};
type Required<S> = S extends { required: readonly (infer R)[] } ? R : never;
/** Keys always present once defaults are applied: required ones and those with a default. */
type Present<S> =
  | Required<S>
  | { [K in keyof Properties<S>]: Properties<S>[K] extends { default: unknown } ? K : never }[keyof Properties<S>];

type Additional<S> = S extends { properties: object }
  ? {} // declared properties: their types win (an index signature would have to cover them)
  : S extends { additionalProperties: infer A }
    ? A extends false
      ? {}
      : A extends object
        ? { [key: string]: FromSchema<A> }
        : { [key: string]: unknown }
    : { [key: string]: unknown };

type FromObject<S> = Simplify<
  { -readonly [K in keyof Properties<S> as K extends Present<S> ? K : never]-?: FromSchema<Properties<S>[K]> } & {
    -readonly [K in keyof Properties<S> as K extends Present<S> ? never : K]?: FromSchema<Properties<S>[K]>;
  } & Additional<S>
>;

type Alternatives<S> = S extends { oneOf: readonly (infer U)[] }
  ? Each<U>
  : S extends { anyOf: readonly (infer U)[] }
    ? Each<U>
    : unknown;
type Each<U> = U extends unknown ? FromSchema<U> : never;
type All<S> = S extends { allOf: readonly (infer U)[] } ? UnionToIntersection<Each<U>> : unknown;
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/**
 * The type of the values a schema (written `as const`) accepts, defaults applied. A boolean schema
 * or one built at run time (typed `JsonSchema`) gives `unknown`.
 */
export type FromSchema<S> = S extends boolean ? unknown : Base<S> & Alternatives<S> & All<S>;
