/**
 * validate-body: checks the JSON request body against a JSON Schema (draft 2020-12, ajv, every
 * error collected) before the rest of the pipeline runs. A failure is `bad_request` (400) whose
 * message names the first offending field, with every violation in details.errors as {field,
 * message}. Malformed JSON is `parse_error` as everywhere (readJson).
 */

import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { definePlugin, type FromSchema, GatewayError, type JsonSchema, readJson } from '../../runtime/index.ts';

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['schema'],
  properties: {
    schema: {
      oneOf: [{ type: 'string', minLength: 1 }, { type: 'object' }],
      description: 'The schema inline, or the path of a JSON/YAML schema file relative to the config file.',
    },
    max_errors: { type: 'integer', minimum: 1, default: 20, description: 'Violations listed at most.' },
  },
} as const satisfies JsonSchema;
type ValidateBodyOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<ValidateBodyOptions>({
  name: 'validate-body',
  dryRun: 'run',
  description: 'Validate the JSON request body against a JSON Schema; 400 naming the field on failure.',
  options: optionsSchema,
  create(options, env) {
    const schema =
      typeof options.schema === 'string'
        ? (JSON.parse(readFileSync(env.resolvePath(options.schema), 'utf8')) as JsonSchema)
        : options.schema;
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    (addFormats as unknown as (a: Ajv2020) => void)(ajv);
    const validate = ajv.compile(schema);
    return async (ctx, next) => {
      const body = await readJson(ctx);
      if (!validate(body)) {
        const errors = (validate.errors ?? []).slice(0, options.max_errors).map(describe);
        const first = errors[0];
        throw new GatewayError(
          'bad_request',
          `Invalid request: ${first.field ? `${first.field} ` : ''}${first.message}`,
          {
            details: { field: first.field, errors },
          },
        );
      }
      return next();
    };
  },
});

/** `{field: "messages[0].role", message: "must be one of system, user, assistant, tool"}`. */
function describe(e: ErrorObject): { field: string; message: string } {
  const params = e.params as Record<string, unknown>;
  let path = e.instancePath
    .split('/')
    .slice(1)
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('')
    .replace(/^\./, '');
  let message = e.message ?? e.keyword;
  if (e.keyword === 'required') {
    path = path ? `${path}.${params.missingProperty}` : String(params.missingProperty);
    message = 'is required';
  } else if (e.keyword === 'additionalProperties') {
    path = path ? `${path}.${params.additionalProperty}` : String(params.additionalProperty);
    message = 'is not allowed';
  } else if (e.keyword === 'enum') {
    message = `must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
  }
  return { field: path, message };
}
