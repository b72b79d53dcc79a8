/**
 * The policy file format, shared by policy files and the registry's policy documents:
 *
 *   name: no-env-disclosure
 *   description: ...
 *   rules:
 *     - id: deny-get-env
 *       description: ...
 *       phase: ingress            # default ingress; egress (answers); tools (each tool a
 *                                 # tools/list answer defines: block strips it, flag marks it)
 *       when: { "==": [ { "var": "tool" }, "get-env" ] }   # json-logic
 *       action: deny              # deny (alias block, stop) | redact | flag | allow
 *       detail: get-env discloses the server's environment   # alias: message
 *       regulation: GDPR          # optional tag, carried to the decision and the audit trail
 *       redact: [pii]             # redact rules: classifiers whose spans are masked
 *                                 # (default: those the condition reads, `classifiers.<name>...`)
 *       scopes: [mcp:tools:write] # block rules: OAuth scopes that would lift the refusal; the
 *                                 # error names them (`required_scopes`), and an oauth-bearer
 *                                 # stage before this one answers 403 insufficient_scope
 *
 * A file holds one document, a list of them, `{policies: [...]}`, or several YAML documents.
 * Every problem is reported with the file, the policy and the rule id.
 */
import { readFile } from 'node:fs/promises';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { parseAllDocuments } from 'yaml';
import { type Condition, checkLogic, compileCondition, type RulesLogic } from './logic.ts';

export type RuleAction = 'block' | 'allow' | 'flag' | 'redact';

/** Words a policy file may use for an action: `deny` and `stop` mean block (one word in decisions, metrics and audit). */
const actionAliases: Record<string, RuleAction> = {
  deny: 'block',
  block: 'block',
  stop: 'block',
  allow: 'allow',
  flag: 'flag',
  redact: 'redact',
};

export interface PolicyRule {
  id: string;
  description?: string;
  phase: string;
  when: RulesLogic;
  /** `when`, compiled. */
  test: Condition;
  action: RuleAction;
  /** The action as the policy file writes it (`stop`, `block`, `deny`...), for reports. */
  verb: string;
  detail: string;
  regulation?: string;
  /** OAuth scopes that would lift this block: named in its error, for the client to ask for. */
  scopes?: string[];
  /** Classifiers the condition reads (`classifiers.<name>...`): the rule's score is their highest. */
  classifiers: string[];
  /** Classifiers whose spans a `redact` rule masks. */
  redact: string[];
  /**
   * Whether the condition reads what differs from one call of a tool to the next (`arguments`,
   * `params`, `body`, or a path it computes): such a rule cannot be decided from a tool listing.
   */
  readsCall: boolean;
}

export interface Policy {
  name: string;
  description?: string;
  /** Where it was read from (file path or registry document). */
  source: string;
  /** Base name of the file it came from (e.g. `default.yaml`), by which tenants select policies. */
  file?: string;
  rules: PolicyRule[];
}

const ruleSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'when', 'action'],
  properties: {
    id: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    // A misspelt phase would make the rule never run: only the phases a policy stage evaluates.
    phase: { enum: ['ingress', 'egress', 'tools'] },
    when: { type: ['object', 'boolean'] },
    action: { enum: Object.keys(actionAliases) },
    detail: { type: 'string' },
    message: { type: 'string' },
    regulation: { type: 'string', minLength: 1 },
    redact: { type: 'array', items: { type: 'string', minLength: 1 } },
    scopes: { type: 'array', minItems: 1, items: { type: 'string', pattern: '^[\\x21\\x23-\\x5B\\x5D-\\x7E]+$' } },
  },
};

/** Documents may carry metadata of their own (version, owner...); rules may not (typos would hide). */
export const policyDocumentSchema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  required: ['name', 'rules'],
  properties: {
    name: { type: 'string', minLength: 1 },
    description: { type: 'string' },
    source: { type: 'string' },
    rules: { type: 'array', items: ruleSchema },
  },
};

const checkDocument = new Ajv2020({ allErrors: true, strict: true, allowUnionTypes: true }).compile(
  policyDocumentSchema,
);

/** Validates one document and checks its rules' logic; throws an Error naming file, policy and rule. */
export function compilePolicy(doc: unknown, source: string): Policy {
  const name = isObject(doc) && typeof doc.name === 'string' ? doc.name : undefined;
  const where = (rule?: string) =>
    `${source}: policy ${name ? `"${name}"` : '(unnamed)'}${rule ? ` rule "${rule}"` : ''}`;
  if (!checkDocument(doc)) {
    const err = (checkDocument.errors ?? [])[0] as ErrorObject;
    const rules = isObject(doc) && Array.isArray(doc.rules) ? doc.rules : [];
    const m = /^\/rules\/(\d+)(\/.*)?$/.exec(err.instancePath);
    const ruleAt = m ? rules[Number(m[1])] : undefined;
    const ruleId = m ? (isObject(ruleAt) && typeof ruleAt.id === 'string' ? ruleAt.id : `#${m[1]}`) : undefined;
    const field = m ? (m[2] ?? '').slice(1).replace(/\//g, '.') : err.instancePath.slice(1).replace(/\//g, '.');
    throw new Error(`${where(ruleId)}: ${field ? `${field} ` : ''}${describe(err)}`);
  }
  const valid = doc as { name: string; description?: string; rules: Array<Record<string, unknown>> };
  const seen = new Set<string>();
  const rules: PolicyRule[] = valid.rules.map((r) => {
    const id = r.id as string;
    if (seen.has(id)) throw new Error(`${where(id)}: duplicate rule id`);
    seen.add(id);
    try {
      checkLogic(r.when);
    } catch (err) {
      throw new Error(`${where(id)}: ${(err as Error).message}`);
    }
    if (r.phase === 'tools' && actionAliases[r.action as string] === 'redact') {
      // A tool definition is not masked: the tool is listed as it is, or withheld.
      throw new Error(`${where(id)}: a tools rule cannot redact (block withholds the tool, flag marks it)`);
    }
    const description = r.description as string | undefined;
    const vars = varsRead(r.when);
    const classifiers = [
      ...new Set(vars.flatMap((v) => (typeof v === 'string' ? (/^classifiers\.([^.]+)/.exec(v)?.[1] ?? []) : []))),
    ];
    return {
      id,
      description,
      phase: (r.phase as string | undefined) ?? 'ingress',
      when: r.when as RulesLogic,
      test: compileCondition(r.when),
      action: actionAliases[r.action as string],
      verb: r.action as string,
      detail:
        (r.detail as string | undefined) ??
        (r.message as string | undefined) ??
        description ??
        `rule "${id}" of policy "${valid.name}"`,
      regulation: r.regulation as string | undefined,
      scopes: r.scopes as string[] | undefined,
      classifiers,
      redact: (r.redact as string[] | undefined) ?? classifiers,
      readsCall: vars.some((v) => typeof v !== 'string' || /^(arguments|params|body)(\.|$)/.test(v)),
    };
  });
  return { name: valid.name, description: valid.description, source, rules };
}

/**
 * The data paths a condition reads (`var`, and the names `missing` / `missing_some` test); a path
 * the condition computes at run time is `null` (it could be anything).
 */
function varsRead(logic: unknown): Array<string | null> {
  const paths: Array<string | null> = [];
  const literal = (v: unknown): string | null => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : null);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) visit(item);
      return;
    }
    if (!isObject(node)) return;
    for (const [op, arg] of Object.entries(node)) {
      if (op === 'var') paths.push(literal(Array.isArray(arg) ? arg[0] : arg));
      else if (op === 'missing') for (const a of Array.isArray(arg) ? arg : [arg]) paths.push(literal(a));
      else if (op === 'missing_some' && Array.isArray(arg)) {
        const names = arg[1];
        if (Array.isArray(names)) for (const a of names) paths.push(literal(a));
        else paths.push(null);
      }
      visit(arg);
    }
  };
  visit(logic);
  return paths;
}

/** Reads a YAML (or JSON) policy file into its documents. */
export async function readPolicyFile(path: string): Promise<unknown[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new Error(`${path}: cannot read policy file: ${(err as Error).message}`);
  }
  const docs: unknown[] = [];
  for (const yamlDoc of parseAllDocuments(text)) {
    if (yamlDoc.errors.length > 0) {
      const e = yamlDoc.errors[0];
      const pos = e.linePos?.[0];
      throw new Error(`${path}${pos ? `:${pos.line}:${pos.col}` : ''}: ${e.message.split('\n')[0]}`);
    }
    const value: unknown = yamlDoc.toJS();
    if (value === null || value === undefined) continue;
    if (Array.isArray(value)) docs.push(...value);
    else if (isObject(value) && Array.isArray(value.policies) && !('rules' in value)) docs.push(...value.policies);
    else docs.push(value);
  }
  return docs;
}

function describe(err: ErrorObject): string {
  const params = err.params as Record<string, unknown>;
  if (err.keyword === 'required') return `is missing "${params.missingProperty}"`;
  if (err.keyword === 'additionalProperties') return `has unknown field "${params.additionalProperty}"`;
  if (err.keyword === 'enum') return `must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
  return err.message ?? `fails ${err.keyword}`;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}
