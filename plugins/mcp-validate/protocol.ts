/**
 * The MCP protocol's own JSON Schemas (schemas/<version>/schema.json, vendored from
 * modelcontextprotocol/modelcontextprotocol), compiled with ajv into one check per protocol
 * version and client method. A message is checked in three steps, each stopping at its first error:
 *
 *   1. the proxy's bounds on names and URIs (tools/call and prompts/get `name`, resource `uri`s),
 *      first, so that no format check ever reads an unbounded string;
 *   2. the JSON-RPC envelope of the version (`JSONRPCRequest` with an `id`, else
 *      `JSONRPCNotification`): an id that is a string or an integer, `params` an object, a
 *      `_meta.progressToken` of the right type — for every method, known or not;
 *   3. the method's own definition (`CallToolRequest`, `CancelledNotification`, …), found in the
 *      version's `ClientRequest` / `ClientNotification` unions. A method the version does not
 *      define but another vendored one does (e.g. `tasks/get` in a 2025-06-18 session) is checked
 *      against the newest definition: a server may implement it whatever was negotiated. A method
 *      no version defines is not checked further (it goes on as before, to the upstream).
 *
 * Compiled once per process and per set of bounds (load time); a check is a few function calls.
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describeSchemaError, pointerSegments } from '../../runtime/index.ts';

/**
 * The legacy versions vendored (an `initialize` handshake opens a session), oldest first: every
 * version the MCP SDK servers negotiate but 2024-10-07.
 */
export const protocolVersions = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'] as const;
export type ProtocolVersion = (typeof protocolVersions)[number];
export const latestVersion: ProtocolVersion = protocolVersions[protocolVersions.length - 1]!;

/**
 * The modern versions vendored (stateless: no `initialize`, the version and the client's
 * capabilities in every request's `_meta`), oldest first.
 */
export const modernVersions = ['2026-07-28'] as const;
export type ModernVersion = (typeof modernVersions)[number];

/** Every version the gateway checks, newest first (the `supported` list of its errors). */
export const supportedVersions: readonly string[] = [...protocolVersions, ...modernVersions].reverse();

export function isProtocolVersion(v: unknown): v is ProtocolVersion {
  return typeof v === 'string' && (protocolVersions as readonly string[]).includes(v);
}

export function isModernVersion(v: unknown): v is ModernVersion {
  return typeof v === 'string' && (modernVersions as readonly string[]).includes(v);
}

export interface Bounds {
  /** Tool and prompt names (MCP 2025-11-25: a tool name SHOULD be 1 to 128 characters). */
  nameMaxLength: number;
  /** Resource URIs (resources/read, subscribe, unsubscribe, completion references). */
  uriMaxLength: number;
}

export interface Problem {
  /** -32600 (the message is not a valid request: its id, or a notification with an id) or -32602 (params). */
  code: -32600 | -32602;
  /** JSON path of the first error, e.g. `$.params.name`. */
  path: string;
  /** What is wrong there, e.g. `must be string`. */
  message: string;
  /** The schema version the message was checked against. */
  schemaVersion: ProtocolVersion | ModernVersion;
  /** -32601 for a legacy method sent in a modern request (`initialize`, `ping`...). */
  missing?: true;
}

type Kind = 'request' | 'notification';

interface MethodCheck {
  kind: Kind;
  /** The version whose definition checks it (the session's, or the newest defining the method). */
  version: ProtocolVersion | ModernVersion;
  validate: ValidateFunction;
}

interface VersionChecks {
  envelope: Record<Kind, ValidateFunction>;
  methods: Map<string, MethodCheck>;
}

export class McpProtocol {
  readonly #versions = new Map<ProtocolVersion | ModernVersion, VersionChecks>();
  /** Methods a legacy version does not define, checked against the newest legacy version that does. */
  readonly #newest = new Map<string, MethodCheck>();
  readonly #bounds = new Map<string, ValidateFunction>();

  constructor(readonly limits: Bounds) {
    const ajvOptions = {
      // The MCP schemas carry keywords ajv does not know (enumNames): not an error. Numbers stay
      // strict: 1e400 parses as Infinity, which JSON.stringify would forward as null.
      strict: false,
      strictNumbers: true,
      allErrors: false,
      // The vendored schemas are the official ones, unchanged: checking them against the
      // meta-schema at every load would cost a third of the compile time for nothing.
      validateSchema: false,
    };
    const draft7 = new Ajv(ajvOptions);
    const draft2020 = new Ajv2020(ajvOptions);
    addFormats.default(draft7);
    addFormats.default(draft2020);
    for (const version of [...protocolVersions, ...modernVersions]) {
      const modern = isModernVersion(version);
      const schema = loadSchema(version);
      const ajv = String(schema.$schema).includes('2020-12') ? draft2020 : draft7;
      const defsKey = schema.$defs ? '$defs' : 'definitions';
      const defs = schema[defsKey] as Record<string, { anyOf?: Array<{ $ref: string }> }>;
      const key = `mcp-${version}`;
      ajv.addSchema(schema, key);
      const ref = (name: string): ValidateFunction => {
        const fn = ajv.getSchema(`${key}#/${defsKey}/${name}`);
        if (!fn) throw new Error(`MCP schema ${version}: no definition ${name}`);
        return fn;
      };
      const methods = new Map<string, MethodCheck>();
      for (const [union, kind] of [
        ['ClientRequest', 'request'],
        ['ClientNotification', 'notification'],
      ] as const) {
        // 2026-07-28 has one client notification: the union is that definition itself.
        const members = defs[union]?.anyOf ?? (defs[union] ? [{ $ref: `#/${defsKey}/${union}` }] : []);
        for (const member of members) {
          const name = member.$ref.split('/').pop() as string;
          const def = defs[name] as { properties?: { method?: { const?: unknown } } };
          const method = def.properties?.method?.const;
          if (typeof method !== 'string') throw new Error(`MCP schema ${version}: ${name} has no method`);
          const check: MethodCheck = { kind, version, validate: ref(name) };
          methods.set(method, check);
          // Legacy versions go oldest first: the last one wins. A modern definition (which requires
          // the modern `_meta`) never checks a legacy session's message.
          if (!modern) this.#newest.set(method, check);
        }
      }
      this.#versions.set(version, {
        envelope: { request: ref('JSONRPCRequest'), notification: ref('JSONRPCNotification') },
        methods,
      });
    }
    const draft = new Ajv2020(ajvOptions);
    for (const [method, schema] of Object.entries(boundSchemas(limits)))
      this.#bounds.set(method, draft.compile(schema));
  }

  /** Whether any vendored version defines this client method. */
  knows(method: string): boolean {
    return this.#newest.has(method);
  }

  /** The first problem of a JSON-RPC message from a client (a request or a notification), or undefined. */
  check(message: Record<string, unknown>, version: ProtocolVersion | ModernVersion): Problem | undefined {
    const checks = this.#versions.get(version);
    if (!checks) throw new Error(`MCP protocol version ${version} is not vendored`);
    const method = message.method as string;
    const kind: Kind = 'id' in message ? 'request' : 'notification';
    let known = checks.methods.get(method);
    if (!known && isModernVersion(version)) {
      // A legacy method (initialize, ping, resources/subscribe, logging/setLevel, tasks/…) is not
      // part of a modern request: the era's answer is method not found, never a legacy check.
      if (this.#newest.has(method)) {
        return {
          code: -32600,
          path: '$.method',
          message: `is not a ${version} method`,
          schemaVersion: version,
          missing: true,
        };
      }
    } else known ??= this.#newest.get(method);
    if (known && known.kind !== kind) {
      return kind === 'request'
        ? problem(-32600, '$.id', `is not allowed: ${method} is a notification`, version)
        : problem(-32600, '$.id', `is required: ${method} is a request`, version);
    }
    const bound = this.#bounds.get(method);
    if (bound && !bound(message)) return fromAjv(bound.errors, version);
    const envelope = checks.envelope[kind];
    if (!envelope(message)) return fromAjv(envelope.errors, version);
    if (known && !known.validate(message)) return fromAjv(known.validate.errors, known.version);
    return undefined;
  }
}

const schemaDir = new URL('./schemas/', import.meta.url);

function loadSchema(version: ProtocolVersion | ModernVersion): Record<string, unknown> {
  return JSON.parse(readFileSync(new URL(`${version}/schema.json`, schemaDir), 'utf8')) as Record<string, unknown>;
}

/** The proxy's bounds, by method: schemas over the whole message, checked before the protocol's. */
function boundSchemas({ nameMaxLength, uriMaxLength }: Bounds): Record<string, object> {
  // Length keywords apply to strings only: a missing name or one of another type is the protocol
  // schema's to report.
  const name = { minLength: 1, maxLength: nameMaxLength };
  const uri = { maxLength: uriMaxLength };
  const params = (properties: Record<string, object>) => ({ properties: { params: { properties } } });
  const resource = params({ uri });
  return {
    'tools/call': params({ name }),
    'prompts/get': params({ name }),
    'resources/read': resource,
    'resources/subscribe': resource,
    'resources/unsubscribe': resource,
    'completion/complete': params({
      ref: { properties: { name, uri } },
      argument: { properties: { name: { maxLength: nameMaxLength } } },
    }),
  };
}

function problem(
  code: Problem['code'],
  path: string,
  message: string,
  schemaVersion: ProtocolVersion | ModernVersion,
): Problem {
  return { code, path, message, schemaVersion };
}

/** The first ajv error as a problem: under `$.params` it is -32602 (invalid params), else -32600. */
function fromAjv(errors: ErrorObject[] | null | undefined, version: ProtocolVersion | ModernVersion): Problem {
  const err = errors?.[0];
  if (!err) return problem(-32600, '$', 'is not a valid MCP message', version);
  const segments = pointerSegments(err.instancePath);
  const leaf = leafProperty(err);
  if (leaf !== undefined) segments.push(leaf);
  const code = segments[0] === 'params' ? -32602 : -32600;
  return problem(code, renderPath(segments), describeSchemaError(err), version);
}

function leafProperty(err: ErrorObject): string | undefined {
  const params = err.params as Record<string, unknown>;
  if (err.keyword === 'required') return String(params.missingProperty);
  if (err.keyword === 'additionalProperties') return String(params.additionalProperty);
  return undefined;
}

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
/** A key longer than this is cut in the path (a client's key is echoed, never amplified). */
const maxSegment = 64;

function renderPath(segments: string[]): string {
  let out = '$';
  for (const seg of segments) {
    if (/^\d+$/.test(seg) && seg.length < 10) out += `[${seg}]`;
    else if (identifier.test(seg) && seg.length <= maxSegment) out += `.${seg}`;
    else out += `[${JSON.stringify(seg.length > maxSegment ? `${seg.slice(0, maxSegment)}…` : seg)}]`;
  }
  return out;
}
