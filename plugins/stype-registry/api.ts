/**
 * Public contract of the `stype-registry` resource: what other plugins (schema-validate,
 * qom-score, policy, registry-api, stype-resolve...) may rely on. Other plugins import this file
 * only, never the registry's internals.
 */
import type { ValidateFunction } from 'ajv';
import type { Violation } from '../../runtime/index.ts';

/**
 * What a request itself asked of the typing stages (the typed direct send's `metadata`, set by
 * jsonrpc-envelope): an SType for stype-resolve, a QoM profile and an explanation for qom-score.
 */
export interface RequestedTyping {
  /** SType id that overrides resolution (404 `stype_not_found` when the registry lacks it). */
  stype?: string;
  /** QoM profile that overrides the stage's (400 when the registry lacks it). */
  qomProfile?: string;
  /** Explain each QoM dimension in the result. */
  explain?: boolean;
}

/** The SType a message resolved to (`ctx.state.stype`, written by stype-resolve). */
export interface ResolvedSType {
  id: string;
  version: string;
  /** `approved` or `pending`, from the registry. */
  status?: string;
}

/** A message's schema validation against its SType (`ctx.state.validation`, `resultValidation`). */
export interface SchemaValidation {
  valid: boolean;
  violations: Violation[];
}

/** A message's QoM score against a profile (`ctx.state.qom`, written by qom-score). */
export interface QomResult {
  profile: string;
  score: number;
  threshold: number;
  passed: boolean;
  dimensions: Record<string, number>;
  /** Why each dimension scored what it did; filled when explanation is asked for. */
  explanation?: Record<string, string>;
}

// Declared here, not in the runtime: STypes, their schema validation and QoM profiles are this
// plugin family's vocabulary (docs/architecture.md, "Module boundaries"). Every plugin that reads
// or writes them imports this file; `needs` / `provides` name them like the runtime's fields.
declare module '../../runtime/state.ts' {
  interface GatewayState {
    /** What the request asked of SType resolution and QoM scoring (see RequestedTyping). */
    requested?: RequestedTyping;
    /** The SType of the JSON-RPC message (stype-resolve). */
    stype?: ResolvedSType;
    /** Schema validation of the request (schema-validate). */
    validation?: SchemaValidation;
    /** Schema validation of the upstream's result, where the SType defines an output schema (schema-validate). */
    resultValidation?: SchemaValidation;
    /** The message's QoM score (qom-score). */
    qom?: QomResult;
  }
}

export type STypeStatus = 'approved' | 'pending';

export interface STypeRecord {
  /** `<namespace>.<name>`; the namespace may itself contain dots. */
  id: string;
  namespace: string;
  name: string;
  status: STypeStatus;
  /** Semantic version of the SType (its schema version). */
  version: string;
  description: string;
  samples: number;
  created_at: string;
  updated_at: string;
  /** JSON Schema (2020-12) of the message payload (for `tools/call`, the tool arguments). */
  schema: Record<string, unknown>;
  /** JSON Schema of the result (MCP `structuredContent` or the result), when defined. */
  output_schema?: Record<string, unknown>;
  /** `sha256:<hex>` of the canonical JSON of `schema`. */
  hash: string;
  qom_profiles: string[];
  policies: string[];
  /** Which JSON-RPC messages resolve to this SType: a method, and for tools/call the tool name. */
  match?: { method: string; tool?: string };
  /**
   * Pinned upstream tool definition: sha256 of the canonical JSON of {name, description,
   * inputSchema} as approved (lower-case hex, no prefix; files may write it with a `sha256:`
   * prefix, which the loader strips). A tool whose live definition hashes differently has drifted.
   */
  pinned_tool_hash?: string;
  /** Path of the file the SType came from (for error messages). */
  source?: string;
}

export interface QomProfile {
  name: string;
  description: string;
  /** Minimum overall score in [0, 1]. */
  threshold: number;
  /** Subset of completeness, consistency, specificity, schema_conform, safety, relevance. */
  dimensions: string[];
  /** Optional weights per dimension (default 1). */
  weights?: Record<string, number>;
}

/** A named policy document as stored in the registry; its rule format belongs to the policy plugin. */
export interface PolicyDocument {
  name: string;
  description?: string;
  source?: string;
  [key: string]: unknown;
}

export interface SearchMatch {
  field: string;
  snippet: string;
}

export interface SearchResult {
  query: string;
  results: Array<{ stype: string; score: number; matches: SearchMatch[] }>;
  total: number;
}

/** Outcome of validating a payload against an SType's schema. */
export interface STypeValidation {
  valid: boolean;
  /** Every error (ajv allErrors), as JSON paths under the given root, e.g. `$.arguments.message`. */
  violations: Violation[];
}

export interface STypeRegistry {
  /** Directory the registry was loaded from (absolute). */
  readonly dir: string;
  /** Namespace of the registry's tool STypes (e.g. `everything`). */
  readonly namespace: string;
  /** Every SType, sorted by id. */
  list(): STypeRecord[];
  get(id: string): STypeRecord | undefined;
  /** The SType a JSON-RPC message resolves to: by `method` and, for `tools/call`, `params.name`. */
  resolve(method: string, params: unknown): STypeRecord | undefined;
  /** Compiled validator of the SType's schema (compiled once at load). */
  validator(id: string): ValidateFunction | undefined;
  /** Compiled validator of the SType's output schema, when it has one. */
  outputValidator(id: string): ValidateFunction | undefined;
  /**
   * Validates a payload against the SType's schema; `root` prefixes the violation paths (default
   * `$`; pass `$.arguments` for tool arguments). Undefined when the SType is unknown.
   */
  validate(id: string, payload: unknown, root?: string): STypeValidation | undefined;
  /** Same, against the output schema; undefined when the SType is unknown or has none. */
  validateOutput(id: string, payload: unknown, root?: string): STypeValidation | undefined;
  profiles(): QomProfile[];
  profile(name: string): QomProfile | undefined;
  policies(): PolicyDocument[];
  policy(name: string): PolicyDocument | undefined;
  search(query: string): SearchResult;
  /** SType id for a tool name under the registry's namespace (e.g. `echo` → `everything.echo`). */
  idForTool(tool: string): string | undefined;
}

/** The options-schema entry by which a stage names its stype-registry resource (checked at validate time). */
export const registryOption = {
  type: 'string',
  minLength: 1,
  'x-ref': 'resource',
  description: 'Name of the stype-registry resource.',
} as const;
