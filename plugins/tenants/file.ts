/**
 * Reading a tenants file (YAML, `tenants: [...]`, see docs/tenants.md). The file is checked against
 * the tenant schema and every problem is reported with its line and column, e.g.
 * `tenants.yaml:7:26: tenants[1].requests_per_minute: must be integer`.
 */
import { readFile } from 'node:fs/promises';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import { type Document, isNode, LineCounter, parseDocument } from 'yaml';
import { pointerSegments } from '../../runtime/index.ts';
import { type TenantSpec, tenantsFileSchema } from './schema.ts';

const ajv = new Ajv2020({ allErrors: true, useDefaults: true, allowUnionTypes: true });
// Upstream names are checked against the service when the directory is built.
ajv.addKeyword({ keyword: 'x-ref', schemaType: 'string' });
const validateFile = ajv.compile<{ tenants: TenantSpec[] }>(tenantsFileSchema);

export async function readTenantsFile(file: string): Promise<TenantSpec[]> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(
      `cannot read tenants file ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  const at = (offset: number) => {
    const { line, col } = lines.linePos(offset);
    return `${file}:${line}:${col}`;
  };
  if (doc.errors.length > 0) {
    throw new Error(doc.errors.map((e) => `${at(e.pos[0])}: ${e.message.split('\n')[0]}`).join('\n'));
  }
  const value = doc.toJS() as unknown;
  if (!validateFile(value)) {
    throw new Error(
      (validateFile.errors ?? []).map((e) => `${position(doc, e, at) ?? file}: ${describe(e)}`).join('\n'),
    );
  }
  return value.tenants;
}

/** `file:line:col` of the value an error is about (its nearest existing ancestor). */
function position(doc: Document, error: ErrorObject, at: (offset: number) => string): string | undefined {
  const path = pathOf(error);
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range) return at(node.range[0]);
  }
  return undefined;
}

function pathOf(error: ErrorObject): Array<string | number> {
  return pointerSegments(error.instancePath).map((s) => (/^\d+$/.test(s) ? Number(s) : s));
}

function describe(error: ErrorObject): string {
  const path = pathOf(error).reduce<string>(
    (acc, s) => (typeof s === 'number' ? `${acc}[${s}]` : acc ? `${acc}.${s}` : s),
    '',
  );
  const extra =
    error.keyword === 'additionalProperties'
      ? ` (${(error.params as { additionalProperty: string }).additionalProperty})`
      : '';
  return `${path || '(file)'}: ${error.message}${extra}`;
}
