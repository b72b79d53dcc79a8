/**
 * What a tool schema may be before anything compiles or validates with it (MCP 2026-07-28, SEP-2106:
 * any 2020-12 keyword, no network `$ref`, bounded composition), and what validating with it costs.
 *
 * Refused, with the reason: a dialect other than 2020-12 or draft-07; more than `max_schema_bytes`,
 * `max_subschemas` subschemas or `max_depth` levels of nesting; a `$ref`/`$dynamicRef` that does not
 * resolve inside the document (a URL, a file, an unknown anchor: never fetched); an embedded
 * resource (`$id` below the root); a reference cycle that never descends into the value (it
 * would validate forever); a pattern the linear engine cannot run; a schema whose evaluation
 * cost (below) exceeds `max_work` on a value of a single node; and one whose compile work exceeds
 * `max_compile` (COMPILE_DEFAULT).
 *
 * The cost is counted, not timed. Each subschema has a weight per evaluation (its keywords; an
 * `enum`'s values; a pattern's call and, per character, its scan; `uniqueItems`' pairwise
 * comparisons). `E[d]` bounds the weight of the evaluations that one node `d` levels down in the
 * value undergoes: the subschemas that apply in place (`allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`
 * /`else`, `dependentSchemas`, `$ref`) are added up with their multiplicity, and those that apply to
 * children (`properties`, `items`, …) move one level down. Every node of a value at depth ≤ h costs
 * at most max(E[0..h]), so validating a value of n nodes and c characters costs at most
 * `node·n + char·c + pairs·n²` (`Cost.work`): checked before ajv runs (schema-budget.ts).
 */
import { type Dialect, dialectOf } from './dialect.ts';
import { linearRegExpProblem } from './linear-regexp.ts';

export interface SchemaLimits {
  /** Nesting of subschemas in the document. */
  max_depth: number;
  /** Subschemas in the document (every schema object or boolean, `$defs` included). */
  max_subschemas: number;
  /** Size of the schema (characters of its JSON, about). */
  max_schema_bytes: number;
  /** Counted work of one validation (units of about one keyword check on one value). */
  max_work: number;
  /** Counted work of compiling it with ajv, on the event loop (`compileUnits`, below). */
  max_compile: number;
}

/**
 * Compiling is work too, and it happens on the event loop (tool-schema.ts compiles a schema at its
 * first use, and its every-error validator at the first failure): ajv generates code for every
 * keyword of every subschema, compiles each pattern on RE2 and each referenced subschema as a
 * function of its own. `compileUnits` counts that work, one unit about one keyword's code (every
 * subschema, every keyword but the annotations, every `required`/`dependentRequired` name, every
 * `anyOf`/`oneOf` alternative once more), a
 * pattern `COMPILE_PATTERN` units, a format `COMPILE_FORMAT`, a `$ref` `COMPILE_REF`; a schema
 * over `max_compile` is refused before ajv sees it. Measured (bench/typed-proxy/hostile-schema.ts,
 * fifteen shapes at the bound: alternatives, properties, patterns, formats, references, nesting,
 * `unevaluated*`, `if`, `$dynamicRef`; ajv with `code.optimize: false`, tool-schema.ts): 30 to 110
 * µs of CPU per unit on this 2-core machine under a load of 19, so at the default either
 * validator compiles within about 33 ms of CPU there, margin under the 50 ms an event-loop turn
 * may take. The largest schema of configs/ and test/ is 27 units.
 */
const COMPILE_DEFAULT = 300;
const COMPILE_PATTERN = 12;
const COMPILE_FORMAT = 2;
const COMPILE_REF = 8;
/** Keywords ajv generates no code for (annotations, and the containers walked on their own). */
const annotations = new Set([
  'title',
  'description',
  'examples',
  'default',
  '$comment',
  'deprecated',
  'readOnly',
  'writeOnly',
  '$schema',
  '$id',
  '$anchor',
  '$dynamicAnchor',
  '$defs',
  'definitions',
  'contentMediaType',
  'contentEncoding',
  'contentSchema',
]);

export const defaultLimits: SchemaLimits = {
  max_depth: 32,
  max_subschemas: 2000,
  max_schema_bytes: 262_144,
  max_work: 2_000_000,
  max_compile: COMPILE_DEFAULT,
};

/** Values deeper than this are not costed (the proxy's requests stop at limits.json_depth, 64 by default). */
export const maxValueDepth = 64;

/** Weights, in work units (one unit ≈ one keyword check on one value; bench/typed-proxy/hostile-schema.ts). */
const PATTERN_CALL = 20;
const PATTERN_CHAR = 3;
const FORMAT_CALL = 5;
const FORMAT_CHAR = 1;
/** `uniqueItems` compares items pairwise (ajv, unless they are typed scalars): per pair, a deep equality. */
const UNIQUE_PAIR = 5;
/**
 * A subschema whose failure is not the value's (an `anyOf`/`oneOf` alternative, `not`, `if`, each
 * item `contains` tries) may fail on every value and still make ajv build an error object for it:
 * forty times a passing check.
 */
export const FAILURE = 40;

/** Per level of the value: the bound on one node's evaluations, by term (see the header). */
export interface Cost {
  /** Work per node, per character of a string or key, per pair of array items (uniqueItems). */
  node: number[];
  char: number[];
  pairs: number[];
  /** Whether subschemas still apply below maxValueDepth (a recursive schema): deeper values are refused. */
  beyond: boolean;
}

export type Inspection =
  | { ok: true; dialect: Dialect; subschemas: number; depth: number; cost: Cost; compile: number }
  | { ok: false; reason: string };

type Weight = [node: number, char: number, pairs: number];

interface Node {
  inPlace: number[];
  child: number[];
  weight: Weight;
}

const inPlaceSingle = ['not', 'if', 'then', 'else'];
const inPlaceArray = ['allOf', 'anyOf', 'oneOf'];
const childSingle = [
  'additionalProperties',
  'propertyNames',
  'unevaluatedItems',
  'unevaluatedProperties',
  'additionalItems',
];
const childMap = ['properties', 'patternProperties'];

class Refusal extends Error {}

const refuse = (reason: string): never => {
  throw new Refusal(reason);
};

/** Inspects a tool schema; `ok: false` carries the reason it is refused. */
export function inspectSchema(schema: unknown, limits: SchemaLimits = defaultLimits): Inspection {
  try {
    return inspect(schema, limits);
  } catch (err) {
    if (err instanceof Refusal) return { ok: false, reason: err.message };
    throw err;
  }
}

function inspect(schema: unknown, limits: SchemaLimits): Inspection {
  const size = boundedSize(schema, limits.max_schema_bytes);
  if (size > limits.max_schema_bytes) refuse(`the schema is larger than ${limits.max_schema_bytes} bytes`);
  const found = dialectOf(schema);
  if ('problem' in found) return refuse(found.problem);
  const { dialect } = found;
  const rootId = isObject(schema) && typeof schema.$id === 'string' ? schema.$id.replace(/#$/, '') : undefined;

  const nodes: Node[] = [];
  const byPointer = new Map<string, number>();
  const anchors = new Map<string, number>();
  const dynamicAnchors = new Map<string, number[]>();
  const refs: Array<{ from: number; ref: string; dynamic: boolean; at: string }> = [];
  let deepest = 0;
  let compile = 0;

  // Declared once, not per node: a closure per subschema costs more than the walk itself.
  const subMap = (key: string, value: unknown, pointer: string, depth: number): number[] => {
    if (!isObject(value)) return refuse(`${pointer}/${key} must be an object of schemas`);
    const out: number[] = [];
    for (const k in value)
      out.push(walk(value[k], `${pointer}/${pointerSegment(key)}/${pointerSegment(k)}`, depth + 1));
    return out;
  };
  const subArray = (key: string, value: unknown, pointer: string, depth: number): number[] => {
    if (!Array.isArray(value)) return refuse(`${pointer}/${key} must be an array of schemas`);
    const out: number[] = [];
    for (let i = 0; i < value.length; i++)
      out.push(walk(value[i], `${pointer}/${pointerSegment(key)}/${i}`, depth + 1));
    return out;
  };
  function walk(s: unknown, pointer: string, depth: number): number {
    const at = pointer === '' ? 'the root' : pointer;
    if (typeof s !== 'boolean' && !isObject(s)) refuse(`${at} is not a schema (an object or a boolean)`);
    if (depth > limits.max_depth) refuse(`subschemas are nested deeper than ${limits.max_depth} levels (at ${at})`);
    if (nodes.length >= limits.max_subschemas) refuse(`the schema has more than ${limits.max_subschemas} subschemas`);
    deepest = Math.max(deepest, depth);
    const id = nodes.length;
    const node: Node = { inPlace: [], child: [], weight: [1, 0, 0] };
    nodes.push(node);
    byPointer.set(pointer, id);
    compile++;
    if (typeof s === 'boolean') return id;
    const o = s as Record<string, unknown>;
    node.weight[0] = Math.max(1, Object.keys(o).length);
    compile += compileUnits(o);
    if (pointer !== '' && typeof o.$id === 'string') {
      // draft-07 spells a plain-name anchor as `$id: "#name"`; anything else starts a new resource.
      if (dialect === 'draft-07' && o.$id.startsWith('#')) anchors.set(o.$id.slice(1), id);
      else refuse(`an embedded schema resource ($id ${JSON.stringify(o.$id)} at ${at}) is not supported`);
    }
    if (typeof o.$anchor === 'string') anchors.set(o.$anchor, id);
    if (typeof o.$dynamicAnchor === 'string') {
      anchors.set(o.$dynamicAnchor, id);
      dynamicAnchors.set(o.$dynamicAnchor, [...(dynamicAnchors.get(o.$dynamicAnchor) ?? []), id]);
    }
    if (o.$ref !== undefined) refs.push({ from: id, ref: String(o.$ref), dynamic: false, at: `${at}/$ref` });
    if (o.$dynamicRef !== undefined) {
      refs.push({ from: id, ref: String(o.$dynamicRef), dynamic: true, at: `${at}/$dynamicRef` });
    }
    if (typeof o.pattern === 'string') {
      const problem = linearRegExpProblem(o.pattern);
      if (problem) refuse(`${problem} at ${pointer}/pattern`);
      node.weight[0] += PATTERN_CALL;
      node.weight[1] += PATTERN_CHAR;
    }
    if (typeof o.format === 'string') {
      node.weight[0] += FORMAT_CALL;
      node.weight[1] += FORMAT_CHAR;
    }
    if (Array.isArray(o.enum)) node.weight[0] += o.enum.length;
    if (o.uniqueItems === true) node.weight[2] += UNIQUE_PAIR;

    for (const key of inPlaceSingle) if (key in o) node.inPlace.push(walk(o[key], `${pointer}/${key}`, depth + 1));
    for (const key of inPlaceArray) if (key in o) node.inPlace.push(...subArray(key, o[key], pointer, depth));
    for (const key of ['anyOf', 'oneOf'])
      if (Array.isArray(o[key])) node.weight[0] += FAILURE * (o[key] as unknown[]).length;
    if ('not' in o) node.weight[0] += FAILURE;
    if ('if' in o) node.weight[0] += FAILURE;
    if ('dependentSchemas' in o) node.inPlace.push(...subMap('dependentSchemas', o.dependentSchemas, pointer, depth));
    if (dialect === 'draft-07' && isObject(o.dependencies)) {
      for (const [k, v] of Object.entries(o.dependencies)) {
        if (!Array.isArray(v)) node.inPlace.push(walk(v, `${pointer}/dependencies/${pointerSegment(k)}`, depth + 1));
      }
    }
    for (const key of childSingle) if (key in o) node.child.push(walk(o[key], `${pointer}/${key}`, depth + 1));
    if ('contains' in o) {
      const tried = walk(o.contains, `${pointer}/contains`, depth + 1);
      nodes[tried].weight[0] += FAILURE;
      node.child.push(tried);
    }
    for (const key of childMap) if (key in o) node.child.push(...subMap(key, o[key], pointer, depth));
    if (isObject(o.patternProperties)) {
      // Every key of the value is tested against every pattern, whether its schema applies or not.
      const keys = Object.keys(o.patternProperties);
      for (const p of keys) {
        const problem = linearRegExpProblem(p);
        if (problem) refuse(`${problem} at ${pointer}/patternProperties`);
      }
      nodes.push({ inPlace: [], child: [], weight: [PATTERN_CALL * keys.length, PATTERN_CHAR * keys.length, 0] });
      node.child.push(nodes.length - 1);
    }
    if ('prefixItems' in o) node.child.push(...subArray('prefixItems', o.prefixItems, pointer, depth));
    if ('items' in o) {
      if (Array.isArray(o.items) && dialect === 'draft-07')
        node.child.push(...subArray('items', o.items, pointer, depth));
      else node.child.push(walk(o.items, `${pointer}/items`, depth + 1));
    }
    for (const key of ['$defs', 'definitions']) if (key in o) subMap(key, o[key], pointer, depth);
    return id;
  }
  walk(schema, '', 0);

  for (const { from, ref, dynamic, at } of refs) {
    const targets = resolve(ref, dynamic, rootId, byPointer, anchors, dynamicAnchors);
    if (!targets) {
      refuse(
        `${dynamic ? '$dynamicRef' : '$ref'} ${JSON.stringify(ref)} at ${at} does not resolve inside the schema (references are never fetched)`,
      );
    }
    nodes[from].inPlace.push(...(targets as number[]));
  }
  const order = inPlaceOrder(nodes);
  const cost = evaluationCost(nodes, order);
  const single = Math.max(...cost.node);
  if (!(single <= limits.max_work)) {
    refuse(`validating a single value against it could take ${format(single)} units of work, over ${limits.max_work}`);
  }
  // Last, so that a schema over a structural bound is refused for that (the more telling reason).
  if (compile > limits.max_compile) {
    refuse(`compiling it would take ${compile} units of work, over ${limits.max_compile}: too large to compile`);
  }
  return { ok: true, dialect, subschemas: nodes.length, depth: deepest, cost, compile };
}

/** A subschema's own compile units, its subschemas not included (see COMPILE_DEFAULT). */
function compileUnits(o: Record<string, unknown>): number {
  let units = 0;
  for (const key in o) {
    if (annotations.has(key)) continue;
    units++;
    const v = o[key];
    if (key === 'required' && Array.isArray(v)) units += v.length;
    else if ((key === 'dependentRequired' || key === 'dependencies') && isObject(v)) {
      for (const k in v) units += 1 + (Array.isArray(v[k]) ? (v[k] as unknown[]).length : 0);
    } else if (key === 'pattern') units += COMPILE_PATTERN;
    else if (key === 'patternProperties' && isObject(v)) units += COMPILE_PATTERN * Object.keys(v).length;
    else if (key === 'format') units += COMPILE_FORMAT;
    // Each alternative's failure is caught and its errors kept or reset: a unit more.
    else if ((key === 'anyOf' || key === 'oneOf') && Array.isArray(v)) units += v.length;
    else if (key === '$ref' || key === '$dynamicRef') units += COMPILE_REF;
  }
  return units;
}

/** The node ids a reference names, or undefined when it does not resolve inside the document. */
function resolve(
  ref: string,
  dynamic: boolean,
  rootId: string | undefined,
  byPointer: Map<string, number>,
  anchors: Map<string, number>,
  dynamicAnchors: Map<string, number[]>,
): number[] | undefined {
  let fragment: string;
  if (ref.startsWith('#')) fragment = ref.slice(1);
  else if (rootId !== undefined && (ref === rootId || ref.startsWith(`${rootId}#`)))
    fragment = ref.slice(rootId.length + 1);
  else return undefined;
  let decoded: string;
  try {
    decoded = decodeURIComponent(fragment);
  } catch {
    return undefined;
  }
  if (decoded === '' || decoded.startsWith('/')) {
    const id = byPointer.get(decoded);
    return id === undefined ? undefined : [id];
  }
  // `$dynamicRef` may land on any `$dynamicAnchor` of that name in the dynamic scope: all of them, as a bound.
  const dynamicTargets = dynamic ? dynamicAnchors.get(decoded) : undefined;
  if (dynamicTargets) return dynamicTargets;
  const id = anchors.get(decoded);
  return id === undefined ? undefined : [id];
}

/**
 * The nodes in an order where in-place successors come first (a post-order), or a refusal when
 * in-place edges form a cycle: a reference that comes back to itself on the same value.
 */
function inPlaceOrder(nodes: Node[]): number[] {
  const state = new Uint8Array(nodes.length); // 0 new, 1 on the stack, 2 done
  const order: number[] = [];
  for (let start = 0; start < nodes.length; start++) {
    if (state[start] !== 0) continue;
    const stack: Array<[number, number]> = [[start, 0]];
    state[start] = 1;
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      const [id, next] = top;
      if (next < nodes[id].inPlace.length) {
        top[1]++;
        const to = nodes[id].inPlace[next];
        if (state[to] === 1) refuse('a $ref cycle applies a subschema to the same value again and again');
        if (state[to] === 0) {
          state[to] = 1;
          stack.push([to, 0]);
        }
      } else {
        state[id] = 2;
        order.push(id);
        stack.pop();
      }
    }
  }
  return order;
}

/** E[d] of the root for d = 0..maxValueDepth, as running maxima (see the header). */
function evaluationCost(nodes: Node[], order: number[]): Cost {
  const cost: Cost = { node: [], char: [], pairs: [], beyond: false };
  // Three terms per node, flat; sums saturate at MAX_VALUE (an exponential schema reaches it, not NaN).
  let previous = new Float64Array(nodes.length * 3);
  let current = new Float64Array(nodes.length * 3);
  const running = [0, 0, 0];
  for (let d = 0; d <= maxValueDepth; d++) {
    let any = false;
    for (const id of order) {
      const { weight, child, inPlace } = nodes[id];
      for (let k = 0; k < 3; k++) {
        let sum = d === 0 ? weight[k] : 0;
        if (d > 0) for (let i = 0; i < child.length; i++) sum += previous[child[i] * 3 + k];
        for (let i = 0; i < inPlace.length; i++) sum += current[inPlace[i] * 3 + k];
        current[id * 3 + k] = Math.min(Number.MAX_VALUE, sum);
        if (sum > 0) any = true;
      }
    }
    // No subschema applies this deep (nor deeper): the running maxima hold from here on.
    if (!any) {
      for (; d <= maxValueDepth; d++) {
        cost.node.push(running[0]);
        cost.char.push(running[1]);
        cost.pairs.push(running[2]);
      }
      return cost;
    }
    for (let k = 0; k < 3; k++) running[k] = Math.max(running[k], current[k]);
    cost.node.push(running[0]);
    cost.char.push(running[1]);
    cost.pairs.push(running[2]);
    [previous, current] = [current, previous];
  }
  cost.beyond = previous[0] > 0;
  return cost;
}

/** Characters of the value's JSON, about, counted without recursion and stopping past `max`. */
export function boundedSize(value: unknown, max: number): number {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && size <= max) {
    const v = stack.pop();
    if (typeof v === 'string') size += v.length + 2;
    else if (Array.isArray(v)) {
      size += 2 + v.length;
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      size += 2;
      for (const [k, x] of Object.entries(v)) {
        size += k.length + 4;
        stack.push(x);
      }
    } else size += String(v).length;
  }
  return size;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** A JSON Pointer segment (RFC 6901). */
function pointerSegment(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

function format(n: number): string {
  return n >= Number.MAX_VALUE ? 'unboundedly many' : n.toExponential(1);
}
