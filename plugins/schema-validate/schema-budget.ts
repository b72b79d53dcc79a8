/**
 * The validation budget, by construction: before ajv runs, the value is measured (nodes, characters
 * of strings and keys, depth) and multiplied by the schema's cost per node (schema-inspect.ts).
 * Work over `max_work` is not attempted: the value is refused as too large for its schema, so no
 * argument object, and no result, holds the event loop longer than the budget allows (about
 * 50 ms at the default, measured by bench/typed-proxy/hostile-schema.ts). The measure itself stops
 * as soon as the bound is passed, so a huge value costs no more than one at the bound to refuse.
 */
import { type Cost, maxValueDepth } from './schema-inspect.ts';

export interface Measure {
  nodes: number;
  chars: number;
  depth: number;
}

/**
 * The counted work of validating a value of this measure against a schema of this cost; the
 * measure itself counts one unit per value (it costs about what a check does).
 */
export function work(cost: Cost, m: Measure): number {
  const d = Math.min(m.depth, maxValueDepth);
  return (cost.node[d] + 1) * m.nodes + cost.char[d] * m.chars + cost.pairs[d] * m.nodes * m.nodes;
}

/** Thrown inside the measure to stop it as soon as the answer is known. */
class Over {
  constructor(readonly reason: string) {}
}

/**
 * Why the value is over the budget, or undefined when validating it costs at most `maxWork`.
 * Stops as soon as the work is over; recursion as deep as the value (which JSON.parse bounded).
 */
export function overBudget(cost: Cost, value: unknown, maxWork: number): string | undefined {
  const m: Measure = { nodes: 0, chars: 0, depth: 0 };
  const visit = (v: unknown, depth: number): void => {
    if (++m.nodes % 1024 === 0 && work(cost, m) > maxWork) throw new Over(tooMuch(cost, m, maxWork));
    if (depth > m.depth) {
      m.depth = depth;
      if (depth > maxValueDepth && cost.beyond) throw new Over(`it is nested deeper than ${maxValueDepth} levels`);
    }
    if (typeof v === 'string') m.chars += v.length;
    else if (typeof v === 'object' && v !== null) {
      if (Array.isArray(v)) for (let i = 0; i < v.length; i++) visit(v[i], depth + 1);
      else {
        const keys = Object.keys(v);
        for (let i = 0; i < keys.length; i++) {
          m.chars += keys[i].length;
          visit((v as Record<string, unknown>)[keys[i]], depth + 1);
        }
      }
    }
  };
  try {
    visit(value, 0);
  } catch (err) {
    if (err instanceof Over) return err.reason;
    throw err;
  }
  return work(cost, m) > maxWork ? tooMuch(cost, m, maxWork) : undefined;
}

function tooMuch(cost: Cost, m: Measure, maxWork: number): string {
  return `validating it against its schema would take over ${maxWork} units of work (${m.nodes}+ values, ${m.chars}+ characters, at ${cost.node[Math.min(m.depth, maxValueDepth)]} per value): too large for this schema`;
}
