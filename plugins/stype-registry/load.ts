/**
 * Loading a registry directory into an immutable snapshot:
 *
 *   <dir>/stypes/<id>.yaml      one SType per file
 *   <dir>/profiles.yaml         QoM profiles
 *   <dir>/policies/<name>.yaml  policy documents
 *
 * Every file is checked (YAML syntax, shape against schemas/*.schema.json, cross references,
 * duplicates) and every problem is collected, so that one load reports all of them with the
 * file and the field; a registry with any problem refuses to load. Validators are compiled here,
 * once per load.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, extname, isAbsolute, join, relative } from 'node:path';
import type { ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { parseDocument } from 'yaml';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import type { PolicyDocument, QomProfile, STypeRecord, STypeStatus } from './api.ts';
import { buildIndex, type SearchIndex } from './search.ts';
import { fieldName, problemMessage } from './violations.ts';

export interface Snapshot {
  records: STypeRecord[];
  byId: Map<string, STypeRecord>;
  /** `tools/call` STypes by tool name. */
  byTool: Map<string, STypeRecord>;
  /** Other STypes by JSON-RPC method. */
  byMethod: Map<string, STypeRecord>;
  validators: Map<string, ValidateFunction>;
  outputValidators: Map<string, ValidateFunction>;
  profiles: QomProfile[];
  profileByName: Map<string, QomProfile>;
  policies: PolicyDocument[];
  policyByName: Map<string, PolicyDocument>;
  index: SearchIndex;
}

const schemaDir = new URL('./schemas/', import.meta.url);

async function loadShape(file: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(new URL(file, schemaDir), 'utf8')) as Record<string, unknown>;
}

function newAjv(): Ajv2020 {
  const ajv = new Ajv2020({ allErrors: true, strict: false });
  addFormats.default(ajv);
  return ajv;
}

/** Shape validators of the registry files, compiled once per process. */
let shapes: Promise<{ stype: ValidateFunction; profiles: ValidateFunction; policy: ValidateFunction }> | undefined;

function shapeValidators() {
  shapes ??= (async () => {
    const ajv = newAjv();
    return {
      stype: ajv.compile(await loadShape('stype.schema.json')),
      profiles: ajv.compile(await loadShape('profiles.schema.json')),
      policy: ajv.compile(await loadShape('policy.schema.json')),
    };
  })();
  return shapes;
}

const DATA_EXT = new Set(['.yaml', '.yml', '.json']);

class Problems {
  readonly list: string[] = [];
  add(file: string, field: string, message: string): void {
    this.list.push(`${display(file)}: ${field}: ${message}`);
  }
}

function display(file: string): string {
  const rel = relative(process.cwd(), file);
  return rel !== '' && !rel.startsWith('..') && !isAbsolute(rel) ? rel : file;
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

async function dataFiles(dir: string): Promise<string[]> {
  if (!(await isDir(dir))) return [];
  const names = await readdir(dir);
  return names
    .filter((n) => !n.startsWith('.') && DATA_EXT.has(extname(n)))
    .sort()
    .map((n) => join(dir, n));
}

/** Parses one YAML (or JSON) file; syntax errors are reported with line and column. */
async function parseFile(file: string, problems: Problems): Promise<unknown> {
  const text = await readFile(file, 'utf8');
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    for (const e of doc.errors) {
      const pos = e.linePos?.[0];
      const message = e.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '');
      problems.add(file, pos ? `line ${pos.line}, column ${pos.col}` : '(file)', message);
    }
    return undefined;
  }
  return doc.toJS();
}

function checkShape(validate: ValidateFunction, data: unknown, file: string, problems: Problems): boolean {
  if (validate(data)) return true;
  for (const err of validate.errors ?? []) problems.add(file, fieldName(err, data), problemMessage(err));
  return false;
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

function stem(file: string): string {
  return basename(file, extname(file));
}

export async function loadSnapshot(dir: string, namespace: string): Promise<Snapshot> {
  if (!(await isDir(dir))) throw new Error(`SType registry directory not found: ${dir}`);
  const shape = await shapeValidators();
  const problems = new Problems();

  const profileProblems = problems.list.length;
  const profiles = await loadProfiles(join(dir, 'profiles.yaml'), shape.profiles, problems);
  const profileByName = new Map(profiles.map((p) => [p.name, p]));
  // A broken profiles file is reported once, not again by every SType that names a profile.
  const checkProfiles = problems.list.length === profileProblems;
  const brokenPolicies = new Set<string>();
  const policies = await loadPolicies(join(dir, 'policies'), shape.policy, problems, brokenPolicies);
  const policyByName = new Map(policies.map((p) => [p.name, p]));

  const stypeDir = join(dir, 'stypes');
  if (!(await isDir(stypeDir))) problems.add(stypeDir, '(dir)', 'missing: the registry keeps one SType per file here');
  const ajv = newAjv();
  const byId = new Map<string, STypeRecord>();
  const byTool = new Map<string, STypeRecord>();
  const byMethod = new Map<string, STypeRecord>();
  const validators = new Map<string, ValidateFunction>();
  const outputValidators = new Map<string, ValidateFunction>();

  for (const file of await dataFiles(stypeDir)) {
    const data = await parseFile(file, problems);
    if (data === undefined || !checkShape(shape.stype, data, file, problems)) continue;
    const raw = data as RawSType;
    const before = problems.list.length;
    const bad = (field: string, message: string) => problems.add(file, field, message);

    if (raw.id !== stem(file)) bad('id', `must equal the file name "${stem(file)}"`);
    if (raw.schema.$id !== raw.id) bad('schema.$id', `must equal the SType id "${raw.id}"`);
    if (Date.parse(raw.updated_at) < Date.parse(raw.created_at)) bad('updated_at', 'is earlier than created_at');
    const dup = byId.get(raw.id);
    if (dup) bad('id', `duplicate of ${display(dup.source ?? '')}`);
    raw.qom_profiles.forEach((p, i) => {
      if (checkProfiles && !profileByName.has(p))
        bad(`qom_profiles[${i}]`, `unknown profile "${p}" (not in profiles.yaml)`);
    });
    raw.policies.forEach((p, i) => {
      if (!policyByName.has(p) && !brokenPolicies.has(p))
        bad(`policies[${i}]`, `unknown policy "${p}" (no policies/${p}.yaml)`);
    });

    const ns =
      raw.namespace ?? (raw.id.startsWith(`${namespace}.`) ? namespace : raw.id.slice(0, raw.id.lastIndexOf('.')));
    if (!raw.id.startsWith(`${ns}.`)) bad('namespace', `"${ns}" is not a prefix of the id "${raw.id}"`);
    const name = raw.id.slice(ns.length + 1);
    // An SType under the registry namespace without `match` is the tool of the same name.
    const match = raw.match ?? (ns === namespace ? { method: 'tools/call', tool: name } : undefined);
    if (match?.method === 'tools/call' && match.tool === undefined) bad('match.tool', 'is required for tools/call');
    if (match && match.method !== 'tools/call' && match.tool !== undefined) bad('match.tool', 'is only for tools/call');
    const taken = match && (match.method === 'tools/call' ? byTool.get(match.tool ?? '') : byMethod.get(match.method));
    if (taken) bad('match', `same as ${taken.id} (${display(taken.source ?? '')}): resolution would be ambiguous`);

    let validator: ValidateFunction | undefined;
    let outputValidator: ValidateFunction | undefined;
    try {
      validator = ajv.compile(raw.schema);
    } catch (err) {
      bad('schema', `is not a valid JSON Schema: ${(err as Error).message}`);
    }
    if (raw.output_schema) {
      try {
        // Compiled without its $id so that it cannot collide with an SType's schema id.
        const { $id: _ignored, ...output } = raw.output_schema;
        outputValidator = ajv.compile(output);
      } catch (err) {
        bad('output_schema', `is not a valid JSON Schema: ${(err as Error).message}`);
      }
    }
    if (problems.list.length > before || !validator) continue;

    const record: STypeRecord = deepFreeze({
      id: raw.id,
      namespace: ns,
      name,
      status: raw.status,
      version: raw.version,
      description: raw.description,
      samples: raw.samples,
      created_at: raw.created_at,
      updated_at: raw.updated_at,
      schema: raw.schema,
      ...(raw.output_schema ? { output_schema: raw.output_schema } : {}),
      hash: `sha256:${sha256Hex(canonicalJson(raw.schema))}`,
      qom_profiles: raw.qom_profiles,
      policies: raw.policies,
      ...(match ? { match } : {}),
      ...(raw.pinned_tool_hash ? { pinned_tool_hash: raw.pinned_tool_hash.replace(/^sha256:/, '') } : {}),
      source: file,
    });
    byId.set(record.id, record);
    if (match?.method === 'tools/call') byTool.set(match.tool as string, record);
    else if (match) byMethod.set(match.method, record);
    validators.set(record.id, validator);
    if (outputValidator) outputValidators.set(record.id, outputValidator);
  }

  if (problems.list.length > 0) {
    const n = problems.list.length;
    throw new Error(
      `SType registry ${display(dir)} has ${n} problem${n === 1 ? '' : 's'}:\n  - ${problems.list.join('\n  - ')}`,
    );
  }
  const records = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return {
    records,
    byId,
    byTool,
    byMethod,
    validators,
    outputValidators,
    profiles,
    profileByName,
    policies,
    policyByName,
    index: buildIndex(records),
  };
}

interface RawSType {
  id: string;
  namespace?: string;
  status: STypeStatus;
  version: string;
  description: string;
  samples: number;
  created_at: string;
  updated_at: string;
  match?: { method: string; tool?: string };
  schema: Record<string, unknown> & { $id: string };
  output_schema?: Record<string, unknown>;
  qom_profiles: string[];
  policies: string[];
  pinned_tool_hash?: string;
}

async function loadProfiles(file: string, validate: ValidateFunction, problems: Problems): Promise<QomProfile[]> {
  let exists = true;
  try {
    await stat(file);
  } catch {
    exists = false;
  }
  if (!exists) return [];
  const data = await parseFile(file, problems);
  if (data === undefined || !checkShape(validate, data, file, problems)) return [];
  const list = (data as { profiles: QomProfile[] }).profiles;
  const seen = new Set<string>();
  list.forEach((p, i) => {
    if (seen.has(p.name)) problems.add(file, `profiles[${i}].name`, `duplicate profile "${p.name}"`);
    seen.add(p.name);
    for (const dim of Object.keys(p.weights ?? {})) {
      if (!p.dimensions.includes(dim)) {
        problems.add(file, `profiles[${i}].weights.${dim}`, 'weights a dimension the profile does not list');
      }
    }
  });
  return deepFreeze(list);
}

async function loadPolicies(
  dir: string,
  validate: ValidateFunction,
  problems: Problems,
  broken: Set<string>,
): Promise<PolicyDocument[]> {
  const out: PolicyDocument[] = [];
  for (const file of await dataFiles(dir)) {
    const data = await parseFile(file, problems);
    if (data === undefined || !checkShape(validate, data, file, problems)) {
      broken.add(stem(file));
      continue;
    }
    const doc = data as PolicyDocument;
    if (doc.name !== stem(file)) {
      problems.add(file, 'name', `must equal the file name "${stem(file)}"`);
      continue;
    }
    out.push(deepFreeze({ ...doc, source: file }));
  }
  return out;
}
