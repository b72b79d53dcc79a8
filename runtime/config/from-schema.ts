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
type Base<S, M> = S extends { const: infer C }
  ? Mutable<C>
  : S extends { enum: readonly (infer E)[] }
    ? E
    : S extends { type: infer T }
      ? FromType<T, S, M>
      : S extends { properties: object }
        ? FromObject<S, M>
        : S extends { items: object }
          ? FromArray<S, M>
          : unknown;

type Mutable<T> = T extends readonly (infer E)[]
  ? Mutable<E>[]
  : T extends object
    ? { -readonly [K in keyof T]: Mutable<T[K]> }
    : T;

type FromType<T, S, M> = T extends readonly (infer U)[]
  ? FromType<U, S, M>
  : T extends 'string'
    ? string
    : T extends 'number' | 'integer'
      ? number
      : T extends 'boolean'
        ? boolean
        : T extends 'null'
          ? null
          : T extends 'array'
            ? FromArray<S, M>
            : T extends 'object'
              ? FromObject<S, M>
              : unknown;

type FromArray<S, M> = S extends { items: infer I } ? FromSchema<I, M>[] : unknown[];

type Properties<S> = S extends { properties: infer P } ? P : {};
type Required<S> = S extends { required: readonly (infer R)[] } ? R : never;
/** Keys always present once defaults are applied: required ones and those with a default. */
type Present<S, M> = Required<S> | (M extends 'written' ? never : Defaulted<S>);
type Defaulted<S> = {
  [K in keyof Properties<S>]: Properties<S>[K] extends { default: unknown } ? K : never;
}[keyof Properties<S>];

type Additional<S, M> = S extends { properties: object }
  ? {} // declared properties: their types win (an index signature would have to cover them)
  : S extends { additionalProperties: infer A }
    ? A extends false
      ? {}
      : A extends object
        ? { [key: string]: FromSchema<A, M> }
        : { [key: string]: unknown }
    : { [key: string]: unknown };

type FromObject<S, M> = Simplify<
  { -readonly [K in keyof Properties<S> as K extends Present<S, M> ? K : never]-?: FromSchema<Properties<S>[K], M> } & {
    -readonly [K in keyof Properties<S> as K extends Present<S, M> ? never : K]?: FromSchema<Properties<S>[K], M>;
  } & Additional<S, M>
>;

type Alternatives<S, M> = S extends { oneOf: readonly (infer U)[] }
  ? Each<U, M>
  : S extends { anyOf: readonly (infer U)[] }
    ? Each<U, M>
    : unknown;
type Each<U, M> = U extends unknown ? FromSchema<U, M> : never;
type All<S, M> = S extends { allOf: readonly (infer U)[] } ? UnionToIntersection<Each<U, M>> : unknown;
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;

/**
 * The type of the values a schema (written `as const`) accepts, defaults applied (`M` = `applied`:
 * what `create` receives), or as a config writes them (`written`: a property with a default may be
 * left out; what a caller of `create` passes). A boolean schema or one built at run time (typed
 * `JsonSchema`) gives `unknown`.
 */
export type FromSchema<S, M = 'applied'> = S extends boolean ? unknown : Base<S, M> & Alternatives<S, M> & All<S, M>;
