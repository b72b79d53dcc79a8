/**
 * The regex engine of tool schemas' `pattern` and `patternProperties`: RE2 (re2-wasm), whose match
 * time is linear in the string whatever the pattern. V8's own engine backtracks: `^(a+)+$`, or
 * even an unanchored `a*b`, takes seconds on a string of a few thousand characters, and a tool
 * schema is the upstream's to write. A pattern RE2 cannot run in linear time (a backreference, a
 * lookaround) does not compile: the schema is refused with RE2's reason.
 *
 * RE2 semantics differ from ECMA-262 in corners (`\s` is ASCII whitespace, `.` excludes only
 * `\n`); docs/enforcement.md says so. A compiled RE2 holds WebAssembly memory that JavaScript's
 * collector does not see: it is freed when the RE2 object is collected (FinalizationRegistry).
 */
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { RE2 } from 're2-wasm';

interface Wrapped {
  delete(): void;
}

const wasmMemory = new FinalizationRegistry<Wrapped>((wrapped) => wrapped.delete());

/** Compiles `source` on RE2 (Unicode mode, as JSON Schema's ECMA-262 patterns are); throws with the reason. */
export function linearRegExp(source: string): RE2 {
  const re = new RE2(source, 'u');
  const wrapped = (re as unknown as { wrapper?: Wrapped }).wrapper;
  if (wrapped) wasmMemory.register(re, wrapped);
  return re;
}

/** Verdicts by pattern (listings repeat the same schemas): bounded, the oldest forgotten first. */
const verdicts = new Map<string, string | null>();
const maxVerdicts = 10_000;

/** Why a pattern cannot run on the linear engine, or undefined when it can. */
export function linearRegExpProblem(source: string): string | undefined {
  const known = verdicts.get(source);
  if (known !== undefined) return known ?? undefined;
  let problem: string | null = null;
  try {
    linearRegExp(source);
  } catch (err) {
    // re2-wasm: "Invalid regular expression: /…/u: invalid perl operator: (?=" → the reason alone.
    const reason = (err as Error).message.replace(/^Invalid regular expression: \/[\s\S]*\/u: /, '');
    problem = `pattern ${JSON.stringify(source)} cannot be matched in linear time (${reason})`;
  }
  if (verdicts.size >= maxVerdicts) verdicts.delete(verdicts.keys().next().value as string);
  verdicts.set(source, problem);
  return problem ?? undefined;
}

/** ajv's `code.regExp` option: every pattern of a compiled schema on RE2. */
export const ajvLinearRegExp: RegExpEngine = Object.assign((pattern: string) => linearRegExp(pattern), {
  code: 'linearRegExp',
});
