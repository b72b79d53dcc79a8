/**
 * Public contract of the openapi plugin: how a stage documents the operation it serves. A plugin
 * registers a describer for its stage name when its module loads; the `openapi-document` stage
 * asks the describer of every stage of every route and merges the answers in pipeline order (a
 * guard in front adds its security and its 401/403, the terminal stage the operation itself).
 *
 *   import { describeStage } from '../openapi/api.ts';
 *   describeStage('record-api', (options, ctx) => ({ operation: { summary: 'List', responses: {...} } }));
 *
 * A route whose stages describe nothing is documented with its method and path only; a describer
 * that returns `hide: true` leaves the route out (a disabled feature, the docs pages themselves).
 */

export interface DescribeContext {
  /** Upper-case HTTP method of this operation. */
  method: string;
  /** The route's path as documented, e.g. `/entities/{entity_id}`. */
  path: string;
  /** A resource of the running service (to read a record type's schema, say). */
  resource<T = unknown>(name: string): T;
}

/** Fields of an OpenAPI 3.1 operation object. */
export interface Operation {
  summary?: string;
  description?: string;
  tags?: string[];
  operationId?: string;
  parameters?: unknown[];
  requestBody?: unknown;
  responses?: Record<string, unknown>;
  security?: unknown[];
}

export interface Contribution {
  operation?: Operation;
  /** Named schemas for `#/components/schemas/...`. */
  schemas?: Record<string, unknown>;
  securitySchemes?: Record<string, unknown>;
  /** Leave this route out of the document. */
  hide?: boolean;
}

export type Describer = (options: unknown, ctx: DescribeContext) => Contribution | undefined;

const describers = new Map<string, Describer>();

/** Registers the describer of a stage (by its plugin name); the last registration wins. */
export function describeStage(plugin: string, describer: Describer): void {
  describers.set(plugin, describer);
}

export function describerOf(plugin: string): Describer | undefined {
  return describers.get(plugin);
}

/** `$ref` to a component schema. */
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });

/** A JSON response with a schema. */
export const jsonResponse = (description: string, schema: unknown) => ({
  description,
  content: { 'application/json': { schema } },
});

/** FastAPI's validation error body, as a component named HTTPValidationError. */
export const validationSchemas = {
  ValidationError: {
    type: 'object',
    title: 'ValidationError',
    required: ['loc', 'msg', 'type'],
    properties: {
      loc: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'integer' }] } },
      msg: { type: 'string' },
      type: { type: 'string' },
      input: {},
      ctx: { type: 'object' },
    },
  },
  HTTPValidationError: {
    type: 'object',
    title: 'HTTPValidationError',
    properties: { detail: { type: 'array', items: ref('ValidationError') } },
  },
  HTTPError: {
    type: 'object',
    title: 'HTTPError',
    properties: { detail: { type: 'string' } },
  },
};

export const errorResponse = (description: string) => jsonResponse(description, ref('HTTPError'));
export const validationResponse = jsonResponse('Validation error', ref('HTTPValidationError'));
