/**
 * Describers of the gateway stages that do not describe themselves (they live in plugins that
 * know nothing of OpenAPI): proxying, JSON-RPC, guards, and the operator endpoints of the typed
 * proxy, the registry, the safety filter and the search service. They name the stage by its
 * plugin name only; nothing of those plugins is imported.
 */
import { type Contribution, describeStage, jsonResponse, type Operation } from './api.ts';

type Options = Record<string, unknown>;

/** A describer that reads its stage's options as a record. */
function describe(plugin: string, fn: (options: Options) => Contribution): void {
  describeStage(plugin, (raw) => fn(raw as Options));
}

const anyJson = { description: 'JSON', content: { 'application/json': { schema: {} } } };
const error = (description: string) => ({ description, content: { 'application/json': { schema: {} } } });

const jsonRpcRequest = {
  type: 'object',
  required: ['jsonrpc', 'method'],
  properties: {
    jsonrpc: { const: '2.0' },
    id: { type: ['string', 'integer', 'null'] },
    method: { type: 'string', examples: ['tools/list', 'tools/call', 'initialize'] },
    params: { type: ['object', 'array'] },
  },
};

describe('proxy', (options) => ({
  operation: {
    summary: `Forwarded to upstream ${String(options.upstream)}`,
    description:
      "After the route's checks, the request goes to the upstream and its answer comes back (streams included); " +
      'an upstream that fails or does not answer in time is 502 / 504 in the route dialect.',
    responses: { 200: anyJson, 502: error('Upstream failed'), 504: error('Upstream timed out') },
  },
}));

describeStage('jsonrpc-parse', () => ({
  operation: {
    tags: ['json-rpc'],
    requestBody: {
      required: true,
      content: {
        'application/json': { schema: { oneOf: [jsonRpcRequest, { type: 'array', items: jsonRpcRequest }] } },
      },
    },
    responses: {
      200: jsonResponse('JSON-RPC response (or an MCP event stream)', { type: 'object' }),
      400: error('Not JSON-RPC 2.0 (-32700 / -32600)'),
    },
  },
}));

describeStage('jsonrpc-envelope', () => ({
  operation: {
    tags: ['json-rpc'],
    summary: 'Typed send: {type, tool, arguments, metadata}, answered {content, metadata}',
    requestBody: {
      required: true,
      content: {
        'application/json': {
          schema: {
            type: 'object',
            required: ['type'],
            properties: {
              type: { type: 'string', examples: ['tools/call'] },
              tool: { type: 'string' },
              arguments: { type: 'object' },
              metadata: { type: 'object' },
            },
          },
        },
      },
    },
  },
}));

describeStage('schema-validate', () => ({
  operation: { responses: { 422: error('Arguments or result do not match the SType schema (strict mode)') } },
}));

describe('validate-body', (options) => {
  const schema = typeof options.schema === 'object' ? options.schema : { type: 'object' };
  return {
    operation: {
      requestBody: { required: true, content: { 'application/json': { schema } } },
      responses: { 400: error('The body does not match its schema (the field is named)') },
    },
  };
});

/** Token guards: the scheme in components and the 401 they answer. */
describe('auth', (options) => {
  if (options.enabled === false) return {};
  const header = String(options.token_header ?? 'Authorization');
  const bearer = header.toLowerCase() === 'authorization' || options.accept_bearer === true;
  const name = bearer ? 'bearerToken' : `token_${header}`;
  return {
    securitySchemes: {
      [name]: bearer ? { type: 'http', scheme: 'bearer' } : { type: 'apiKey', in: 'header', name: header },
    },
    operation: { security: [{ [name]: [] }], responses: { 401: error('Token missing or wrong') } },
  };
});

describeStage('tenant-auth', () => ({
  securitySchemes: { tenantKey: { type: 'http', scheme: 'bearer', description: "A tenant's API key" } },
  operation: { security: [{ tenantKey: [] }], responses: { 401: error('API key missing or unknown') } },
}));

describe('oauth-bearer', (options) => {
  if (options.enabled === false) return {};
  return {
    securitySchemes: { oauth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
    operation: {
      security: [{ oauth: (options.scopes as string[] | undefined) ?? [] }],
      responses: { 401: error('Access token missing or invalid'), 403: error('Insufficient scope') },
    },
  };
});

describeStage('rate-limit', () => ({ operation: { responses: { 429: error('Rate limited') } } }));
describeStage('token-limit', () => ({ operation: { responses: { 429: error('Rate limited') } } }));

/** Terminal stages by operation. */
const byOp = (plugin: string, tag: string, summaries: Record<string, string>) =>
  describe(plugin, (options) => {
    const operation: Operation = { tags: [tag], summary: summaries[String(options.op)] ?? plugin };
    return { operation };
  });

byOp('registry-api', 'registry', {
  list: 'List STypes (filters: status, namespace, limit)',
  detail: 'One SType',
  schema: "An SType's JSON Schema",
  validate: 'Validate a message against its SType',
  profiles: 'QoM profiles',
  search: 'Search STypes',
});
byOp('classifiers-api', 'admin', {
  list: 'List the classifiers',
  test: 'Run one classifier on a text',
  warmup: 'Load every model',
});
byOp('policy-api', 'admin', { test: 'Test a text against a policy', list: 'List the policies' });
byOp('tenants-api', 'admin', { list: 'List the tenants', info: 'One tenant (X-Tenant-ID) and its rate-limit state' });
byOp('audit-api', 'audit', { list: 'Audit records', verify: 'Verify the hash chain' });

describeStage('capabilities', () => ({ operation: { summary: 'What this proxy enforces and exposes' } }));
describeStage('reload-api', () => ({ operation: { tags: ['admin'], summary: 'Reload the service (transaction)' } }));
describe('respond', (options) => ({
  operation: { responses: { [String(options.status ?? 200)]: jsonResponse('Fixed answer', {}) } },
}));
describeStage('web-search', () => ({
  operation: {
    tags: ['search'],
    summary: 'Search the web and return the text of the result pages',
    parameters: [{ name: 'q', in: 'query', required: true, schema: { type: 'string' } }],
    responses: { 400: error("Missing query parameter 'q'") },
  },
}));
describeStage('fan-out', () => ({
  operation: {
    responses: {
      200: jsonResponse('Result pages: {"0": [url, text], ...}', {
        type: 'object',
        additionalProperties: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'string' }] },
      }),
    },
  },
}));
