/**
 * The validation budget, by construction: before ajv runs, the value is measured (nodes, characters
 * of strings and keys, depth) and multiplied by the schema's cost per node (schema-inspect.ts).
 * Work over `max_work` is not attempted: the value is refused as too large for its schema, so no
 * argument object, and no result, holds the event loop longer than the budget allows (about
 * 50 ms at the default, measured by bench/typed-proxy/hostile-schema.ts). The measure itself stops
 * as soon as the bound is passed, so a huge value costs no more than a small one to refuse.
 */
import { type Cost, maxValueDepth } from './schema-inspect.ts';

export interface Measure {
  nodes: number;
  chars: number;
  depth: number;
}

/** The counted work of validating a value of this measure against a schema of this cost. */
export function work(cost: Cost, m: Measure): number {
  const d = Math.min(m.depth, maxValueDepth);
  return cost.node[d] * m.nodes + cost.char[d] * m.chars + cost.pairs[d] * m.nodes * m.nodes;
}

/**
 * Why the value is over the budget, or undefined when validating it costs at most `maxWork`.
 * Without recursion; stops as soon as the work is over.
 */
export function overBudget(cost: Cost, value: unknown, maxWork: number): string | undefined {
  const m: Measure = { nodes: 0, chars: 0, depth: 0 };
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop() as [unknown, number];
    m.nodes++;
    if (depth > m.depth) m.depth = depth;
    if (typeof v === 'string') m.chars += v.length;
    else if (Array.isArray(v)) for (const x of v) stack.push([x, depth + 1]);
    else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        m.chars += k.length;
        stack.push([x, depth + 1]);
      }
    }
    if (depth > maxValueDepth && cost.beyond) {
      return `it is nested deeper than ${maxValueDepth} levels`;
    }
    // Checked every 256 nodes, and at the end: cheap next to the work it bounds.
    if ((m.nodes & 0xff) === 0 && work(cost, m) > maxWork) return tooMuch(cost, m, maxWork);
  }
  return work(cost, m) > maxWork ? tooMuch(cost, m, maxWork) : undefined;
}

function tooMuch(cost: Cost, m: Measure, maxWork: number): string {
  return `validating it against its schema would take over ${maxWork} units of work (${m.nodes}+ values, ${m.chars}+ characters, at ${cost.node[Math.min(m.depth, maxValueDepth)]} per value): too large for this schema`;
}
