/**
 * mcp-validate: checks every MCP request and notification a client sends against the protocol's
 * own JSON Schema for the protocol version of its session (protocol.ts), before any later stage or
 * upstream sees it. A malformed message is answered at once: HTTP 400 with JSON-RPC -32602
 * (invalid params) or -32600 (invalid request: the id, a request sent as a notification), naming
 * the JSON path of the first error. Whatever the enforcement mode: a message the protocol does not
 * allow can leave a server without an answer (`params: [1, 2]` is never answered by the SDK's).
 *
 * Which version: at `initialize`, the one the client asks for (else the newest vendored); in a
 * session the gateway issued (`upstream`), the one the server answered to its `initialize`;
 * otherwise the `MCP-Protocol-Version` header, else 2025-03-26 for a client with a session (the
 * transport's rule) and `version` (the gateway's own session's) for one without. A header naming a
 * version that is not vendored is 400, as the transport requires; an `initialize` answered with
 * such a version is refused (-32602 `Unsupported protocol version`) and its session ended.
 *
 * A modern request (2026-07-28: its version in `params._meta`, or in the MCP-Protocol-Version
 * header) is checked statelessly, against the 2026-07-28 schema, whatever session header it
 * carries: its version must be one the gateway speaks (else 400, -32022 with the supported list),
 * its `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers must be present and match the
 * body (else 400, -32020: modern.ts), and a legacy method (`initialize`, `ping`…) is 404, -32601.
 *
 * With `upstream`, the stage also tells the audit trail which session a request belongs to
 * (`ctx.state.mcpSession`): only a session id the gateway issued and that is still live (and, with
 * authentication, the caller's own), never one a client merely claims.
 */
import {
  definePlugin,
  type FromSchema,
  type GatewayContext,
  GatewayError,
  isRpcUpstream,
  type JsonRpcRequest,
  type JsonSchema,
  MCP_PROTOCOL_VERSION,
  type RpcSessions,
  readRpcResponse,
  subjectOf,
  syncStage,
} from '../../runtime/index.ts';
import {
  checkModern,
  checkParamHeaders,
  metaVersionOf,
  type ParamHeader,
  paramHeadersOf,
  unsupportedVersion,
} from './modern.ts';
import {
  isModernVersion,
  isProtocolVersion,
  latestVersion,
  McpProtocol,
  type ModernVersion,
  type Problem,
  type ProtocolVersion,
  protocolVersions,
  supportedVersions,
} from './protocol.ts';

/** The version the transport tells a server to assume when a client sends no MCP-Protocol-Version. */
const headerlessVersion: ProtocolVersion = '2025-03-26';

/** Compiled once per process and set of bounds: reloads and routes share them. */
const compiled = new Map<string, McpProtocol>();

function protocolFor(nameMaxLength: number, uriMaxLength: number): McpProtocol {
  const key = `${nameMaxLength}/${uriMaxLength}`;
  let protocol = compiled.get(key);
  if (!protocol) {
    protocol = new McpProtocol({ nameMaxLength, uriMaxLength });
    compiled.set(key, protocol);
  }
  return protocol;
}

/**
 * The version each live session negotiated, per upstream's sessions (shared by the stages of all
 * routes and reloads using that upstream). Entries of ended sessions go when the next one is added.
 */
const negotiatedBySessions = new WeakMap<RpcSessions, Map<string, string>>();

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    upstream: {
      type: 'string',
      'x-ref': 'upstream',
      description:
        "The upstream this route's proxy stage sends to. When the gateway issues its client sessions (a stdio MCP " +
        'server), each session is checked against the version its initialize negotiated, and only their ids are ' +
        'attributed in the audit trail.',
    },
    version: {
      enum: [...protocolVersions],
      description: `Version of a message outside any client session (the gateway's own session asks for ${MCP_PROTOCOL_VERSION}, the default).`,
    },
    name_max_length: {
      type: 'integer',
      minimum: 1,
      default: 128,
      description: 'Longest tool or prompt name accepted (MCP 2025-11-25: tool names SHOULD be 1 to 128 characters).',
    },
    uri_max_length: {
      type: 'integer',
      minimum: 1,
      default: 8192,
      description: 'Longest resource URI accepted (resources/read, subscribe, unsubscribe, completion references).',
    },
    require_headers: {
      type: 'boolean',
      default: true,
      description:
        'A modern (2026-07-28) request must carry the MCP-Protocol-Version, Mcp-Method and (tools/call, ' +
        'resources/read, prompts/get) Mcp-Name headers, as the streamable HTTP transport requires; false for a ' +
        'route that is no MCP endpoint (headers sent are still checked against the body).',
    },
  },
} as const satisfies JsonSchema;
type McpValidateOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<McpValidateOptions>({
  name: 'mcp-validate',
  description:
    "Validate MCP requests and notifications against the protocol's JSON Schema for the session's version, or a " +
    "2026-07-28 request's own, with its Mcp-* headers against the body (400, -32602 with the path; -32020; -32022).",
  needs: ['rpc'],
  provides: (options) => (options.upstream ? ['mcpSession'] : []),
  options: optionsSchema,
  create(options, env) {
    const protocol = protocolFor(options.name_max_length, options.uri_max_length);
    const ownVersion: ProtocolVersion =
      options.version ?? (isProtocolVersion(MCP_PROTOCOL_VERSION) ? MCP_PROTOCOL_VERSION : latestVersion);
    // A stdio MCP upstream: the gateway issues its sessions. Any other (MCP over HTTP, forwarded):
    // the session ids are the server's, unknown here, so none is attributed.
    const upstream = options.upstream ? env.upstream(options.upstream) : undefined;
    const sessions: RpcSessions | undefined = upstream && isRpcUpstream(upstream) ? upstream.sessions : undefined;
    let negotiated: Map<string, string> | undefined;
    if (sessions) {
      negotiated = negotiatedBySessions.get(sessions);
      if (!negotiated) {
        negotiated = new Map();
        negotiatedBySessions.set(sessions, negotiated);
      }
    }
    const refused = env.metrics.counter({
      name: 'switchyard_mcp_invalid_total',
      help: 'MCP messages refused by mcp-validate (protocol schema or version), by method (other: one no version defines)',
      labelNames: ['method'] as const,
    });

    const requireHeaders = options.require_headers;
    /** Each listed tool's x-mcp-header annotations (its Mcp-Param-* headers), from the tools/list answers seen. */
    const paramHeaders = new Map<string, ParamHeader[] | { invalid: string }>();

    /** The annotations of the tools a tools/list answer lists (a JSON answer; an event stream is not read). */
    async function recordParamHeaders(ctx: GatewayContext): Promise<void> {
      const answer = ctx.state.answer;
      if (!answer || answer.isEventStream || answer.status !== 200) return;
      let response: Awaited<ReturnType<typeof readRpcResponse>>;
      try {
        response = await readRpcResponse(ctx);
      } catch {
        return; // not a JSON-RPC answer: nothing to record
      }
      const tools = (response?.result as Record<string, unknown> | undefined)?.tools;
      if (!Array.isArray(tools)) return;
      for (const tool of tools) {
        const name = (tool as Record<string, unknown> | null)?.name;
        if (typeof name !== 'string') continue;
        paramHeaders.delete(name);
        if (paramHeaders.size >= maxParamTools) paramHeaders.delete(paramHeaders.keys().next().value as string);
        paramHeaders.set(name, paramHeadersOf((tool as Record<string, unknown>).inputSchema));
      }
    }

    /**
     * The protocol version a message is checked against: a modern request's (its `_meta`, else its
     * header), checked against its headers; else the legacy rules.
     */
    function versionOf(ctx: GatewayContext, rpc: JsonRpcRequest): ProtocolVersion | ModernVersion {
      const asked = metaVersionOf(rpc);
      const header = ctx.get('mcp-protocol-version');
      if (asked !== undefined || isModernVersion(header)) {
        const checked = checkModern(rpc, asked ?? header, ctx, requireHeaders);
        if (checked instanceof GatewayError) throw checked;
        return checked;
      }
      if (rpc.method === 'initialize') {
        const asked = (rpc.params as Record<string, unknown> | undefined)?.protocolVersion;
        return isProtocolVersion(asked) ? asked : latestVersion;
      }
      if (header !== '' && !isProtocolVersion(header)) throw unsupportedVersion(header);
      const session = ctx.get('mcp-session-id');
      const agreed = session === '' ? undefined : negotiated?.get(session);
      if (agreed !== undefined) {
        if (!isProtocolVersion(agreed)) throw unsupportedVersion(agreed);
        return agreed;
      }
      if (header !== '') return header as ProtocolVersion;
      return session === '' ? ownVersion : headerlessVersion;
    }

    /** The answer to initialize: the version the server chose, kept for the session; refused if not vendored. */
    async function recordNegotiated(ctx: GatewayContext, map: Map<string, string>, live: RpcSessions): Promise<void> {
      const issued = ctx.response.get('mcp-session-id');
      if (!issued) return;
      ctx.state.mcpSession = issued;
      const answer = ctx.state.answer;
      const body = answer && !answer.isEventStream ? ((await answer.json()) as Record<string, unknown>) : undefined;
      const chosen = (body?.result as Record<string, unknown> | undefined)?.protocolVersion;
      for (const id of map.keys()) if (!live.has(id)) map.delete(id);
      if (isProtocolVersion(chosen)) {
        map.set(issued, chosen);
        return;
      }
      // A version this gateway cannot check: nothing of the session is forwarded unchecked.
      await live.end(issued);
      ctx.remove('Mcp-Session-Id');
      ctx.state.mcpSession = undefined;
      refused.inc({ method: 'initialize' });
      throw new GatewayError('bad_request', 'Unsupported protocol version', {
        rpcCode: -32602,
        details: {
          reason: `the server chose MCP protocol version ${String(chosen)}, which this gateway cannot validate`,
          supported: [...protocolVersions],
          requested: (ctx.state.rpc?.params as Record<string, unknown> | undefined)?.protocolVersion,
        },
      });
    }

    /** versionOf, counting a refusal. */
    function checkedVersion(ctx: GatewayContext, rpc: JsonRpcRequest): ProtocolVersion | ModernVersion {
      try {
        return versionOf(ctx, rpc);
      } catch (err) {
        refused.inc({ method: protocol.knows(rpc.method) ? rpc.method : 'other' });
        throw err;
      }
    }

    return {
      // Not async: every request but a tools/list or an initialize passes next()'s promise on
      // (docs/performance.md, "Work per request").
      handle: syncStage((ctx, next) => {
        const rpc = ctx.state.rpc;
        const version = rpc ? checkedVersion(ctx, rpc) : undefined;
        // A modern request belongs to no session, whatever header it carries.
        if (sessions && !isModernVersion(version)) {
          const claimed = ctx.get('mcp-session-id');
          if (claimed !== '' && sessions.has(claimed, subjectOf(ctx))) ctx.state.mcpSession = claimed;
        }
        if (rpc && version) {
          const found = protocol.check(rpc as unknown as Record<string, unknown>, version);
          if (found) {
            refused.inc({ method: protocol.knows(rpc.method) ? rpc.method : 'other' });
            throw invalidMessage(found, rpc);
          }
          // Mcp-Param-* (the tool's x-mcp-header parameters) against the arguments, as Mcp-Name.
          if (isModernVersion(version) && rpc.method === 'tools/call') {
            const name = (rpc.params as Record<string, unknown>).name as string;
            const mismatch = checkParamHeaders(rpc, ctx.headers, paramHeaders.get(name));
            if (mismatch) {
              refused.inc({ method: rpc.method });
              throw mismatch;
            }
          }
        }
        if (rpc?.method === 'tools/list' && rpc.id !== undefined) return next().then(() => recordParamHeaders(ctx));
        if (rpc?.method === 'initialize' && sessions && negotiated) {
          const [map, live] = [negotiated, sessions];
          return next().then(() => recordNegotiated(ctx, map, live));
        }
        return next();
      }),
      describe: () => ({
        versions: [...supportedVersions],
        own_version: ownVersion,
        name_max_length: options.name_max_length,
        uri_max_length: options.uri_max_length,
        sessions: options.upstream ?? null,
      }),
    };
  },
});

/** Tools whose Mcp-Param-* annotations are remembered at most (the oldest listed forgotten first). */
const maxParamTools = 10_000;

function invalidMessage(p: Problem, rpc: JsonRpcRequest): GatewayError {
  if (p.missing) {
    return new GatewayError(
      'not_found',
      `Method not found: ${methodLabel(rpc.method)} is not an MCP ${p.schemaVersion} method`,
      {
        rpcCode: -32601,
        details: { method: methodLabel(rpc.method), protocol_version: p.schemaVersion },
      },
    );
  }
  const what = p.code === -32602 ? 'Invalid params' : 'Invalid request';
  return new GatewayError('bad_request', `${what}: ${p.path} ${p.message}`, {
    rpcCode: p.code,
    details: { path: p.path, problem: p.message, method: methodLabel(rpc.method), protocol_version: p.schemaVersion },
  });
}

/** The method as echoed in an error: at most the longest MCP method name, a little over. */
function methodLabel(method: string): string {
  return method.length > 64 ? `${method.slice(0, 64)}…` : method;
}
