/**
 * response-headers: sets response headers from the per-request state once the rest of the
 * pipeline has run, on success and on error alike (a rejected request still says which SType
 * and mode applied). Each header takes a dotted path into `ctx.state` (`stype.id`, `qom.score`,
 * `requestId`) or a literal `{value}`; `{path, map, default}` renames values and fills absent
 * ones; a header whose value is undefined is left out. Objects and arrays are written as JSON.
 */
import {
  compileStatePath,
  definePlugin,
  type FromSchema,
  type GatewayContext,
  type JsonSchema,
} from '../../runtime/index.ts';

type HeaderSpec =
  | string
  | { value: string }
  | { path: string; decimals?: number; map?: Record<string, string>; default?: string };

type Resolver = (ctx: GatewayContext) => string | undefined;

/** Non-integer numbers are written with this many decimals unless the header says otherwise. */
const defaultDecimals = 3;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['set'],
  properties: {
    trailers: {
      type: 'array',
      items: { type: 'string', pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
      description: 'Headers of `set` also sent as trailers of a streamed answer, read when it ends.',
    },
    set: {
      type: 'object',
      description: 'Header name → dotted path into the request state, {value: literal}, or {path, decimals}.',
      propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
      additionalProperties: {
        oneOf: [
          { type: 'string', minLength: 1 },
          {
            type: 'object',
            additionalProperties: false,
            required: ['value'],
            properties: { value: { type: 'string' } },
          },
          {
            type: 'object',
            additionalProperties: false,
            required: ['path'],
            properties: {
              path: { type: 'string', minLength: 1 },
              decimals: { type: 'integer', minimum: 0, maximum: 12 },
              map: {
                type: 'object',
                additionalProperties: { type: 'string' },
                description: 'Renames values, e.g. {deny: block}.',
              },
              default: { type: 'string', description: 'Value when the path is absent.' },
            },
          },
        ],
      },
    },
  },
} as const satisfies JsonSchema;
export type ResponseHeadersOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ResponseHeadersOptions>({
  name: 'response-headers',
  dryRun: 'run',
  description: 'Set response headers from per-request state (SType, score, mode, request id...), on errors too.',
  options: optionsSchema,
  create(options) {
    const headers: Array<[string, Resolver]> = Object.entries(options.set).map(([name, spec]) => [name, compile(spec)]);
    const trailers = (options.trailers ?? []).map((name): [string, Resolver] => {
      const found = headers.find(([n]) => n.toLowerCase() === name.toLowerCase());
      if (!found) throw new Error(`response-headers: trailer "${name}" is not one of the headers it sets`);
      return found;
    });
    // Set before the error (if any) travels on to the dialect: rendering keeps them.
    const setHeaders = (ctx: GatewayContext): void => {
      if (ctx.headerSent) return;
      // Straight to Node (a string value, a valid name, headers not sent: what ctx.set would
      // do), without Koa's per-call arrays.
      const res = ctx.res;
      for (const [name, resolve] of headers) {
        const value = resolve(ctx);
        if (value !== undefined) res.setHeader(name, value);
      }
      const answer = ctx.state.answer;
      if (trailers.length > 0 && answer?.isEventStream) {
        for (const [name, resolve] of trailers) answer.trailer(name, () => resolve(ctx));
      }
    };
    return {
      // One `then` on next()'s promise, not an async frame and an await (docs/performance.md, "Work per request").
      handle: (ctx, next) =>
        next().then(
          () => setHeaders(ctx),
          (err: unknown) => {
            setHeaders(ctx);
            throw err;
          },
        ),
      describe: () => ({ headers: Object.keys(options.set), trailers: options.trailers ?? [] }),
    };
  },
});

function compile(spec: HeaderSpec): Resolver {
  if (typeof spec === 'object' && 'value' in spec) {
    const literal = headerSafe(spec.value);
    return () => literal;
  }
  const read = compileStatePath(typeof spec === 'string' ? spec : spec.path);
  const decimals = typeof spec === 'object' ? spec.decimals : undefined;
  const map = typeof spec === 'object' ? spec.map : undefined;
  const fallback = typeof spec === 'object' && spec.default !== undefined ? headerSafe(spec.default) : undefined;
  return (ctx) => {
    const value = read(ctx.state);
    const mapped = map && typeof value === 'string' && Object.hasOwn(map, value) ? map[value] : value;
    return format(mapped, decimals) ?? fallback;
  };
}

function format(value: unknown, decimals: number | undefined): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) return undefined;
    if (decimals !== undefined) return value.toFixed(decimals);
    return Number.isInteger(value) ? String(value) : value.toFixed(defaultDecimals);
  }
  if (typeof value === 'string') return headerSafe(value);
  if (typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  return headerSafe(JSON.stringify(value));
}

/** Header values must be visible ASCII: other characters are percent-encoded, never injected. */
const unsafeHeaderChar = /[^\t\x20-\x7e]/;

function headerSafe(s: string): string {
  if (!unsafeHeaderChar.test(s)) return s; // the common case, without building a new string
  return s.replace(/[^\t\x20-\x7e]/gu, (c) =>
    [...Buffer.from(c, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join(''),
  );
}
