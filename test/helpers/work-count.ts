/**
 * Deterministic measures of the work a piece of synchronous code does on a text, for complexity
 * tests that must not depend on the machine's speed or load (docs/classifiers.md, "Linear time").
 *
 * `countWork(fn)` runs `fn` with the string, regex and array built-ins that scanners use wrapped
 * to count what they touch: characters read (`charCodeAt`, `codePointAt`, `charAt`, `at`),
 * characters a search passes over (`indexOf`, `includes`, `startsWith`, a regex `exec` from its
 * start to its match or the end), characters copied (`slice`, `toLowerCase`, `normalize`...),
 * elements stored or sorted (`push`, `sort`: findings allocated, positions collected), plus the
 * explicit steps a scanner that indexes `text[i]` reports with `countStep` (detector.ts). The
 * same input gives the same count on every run, whatever else the machine is doing.
 *
 * `recordRegExps(fn)` lists every RegExp `fn` executes (source and flags), so a test can check
 * each one without the code under test having to declare them.
 */
import { workCounter } from '../../plugins/classify/patterns/detector.ts';

type Method = (this: unknown, ...args: unknown[]) => unknown;

let work = 0;
let active = false;
let recording: Map<string, { source: string; flags: string }> | undefined;
/** The RegExp objects already recorded: a group's regex source runs to kilobytes, keyed once. */
let recorded: WeakSet<RegExp> | undefined;

const stringProto = String.prototype as unknown as Record<string, Method>;
const arrayProto = Array.prototype as unknown as Record<string, Method>;
const originals = new Map<object, Record<string, Method>>();

/** Replaces `proto[name]` by a wrapper that adds `cost(this, args, result)` while counting. */
function wrap(
  proto: Record<string, Method>,
  name: string,
  cost: (self: unknown, args: unknown[], result: unknown) => number,
) {
  const saved = originals.get(proto) ?? {};
  originals.set(proto, saved);
  const original = proto[name] as Method;
  saved[name] = original;
  proto[name] = function (this: unknown, ...args: unknown[]) {
    const result = original.apply(this, args);
    if (active) {
      active = false; // the cost functions use built-ins themselves
      work += cost(this, args, result);
      active = true;
    }
    return result;
  };
}

const len = (self: unknown) => String(self).length;
const from = (args: unknown[], i: number) => Math.max(0, Number(args[i] ?? 0) || 0);
/** A forward search from `args[1]`: the characters up to the hit (or the end). */
const searched = (self: unknown, args: unknown[], at: number) =>
  (at >= 0 ? at + String(args[0]).length : len(self)) - from(args, 1) + 1;

function install() {
  for (const name of ['charCodeAt', 'codePointAt', 'charAt', 'at']) wrap(stringProto, name, () => 1);
  wrap(stringProto, 'indexOf', (self, args, r) => searched(self, args, r as number));
  wrap(stringProto, 'includes', (self, args) => len(self) - from(args, 1) + 1);
  wrap(stringProto, 'lastIndexOf', (self) => len(self) + 1);
  wrap(stringProto, 'startsWith', (_self, args) => String(args[0]).length + 1);
  wrap(stringProto, 'endsWith', (_self, args) => String(args[0]).length + 1);
  for (const name of ['slice', 'substring', 'substr', 'toLowerCase', 'toUpperCase', 'normalize', 'trim', 'repeat'])
    wrap(stringProto, name, (_self, _args, r) => String(r).length + 1);
  wrap(stringProto, 'split', (self) => len(self) + 1);
  wrap(arrayProto, 'push', (_self, args) => args.length);
  wrap(arrayProto, 'sort', (self) => (self as unknown[]).length + 1);
  const regexProto = RegExp.prototype as unknown as Record<string, Method>;
  const saved = originals.get(regexProto) ?? {};
  originals.set(regexProto, saved);
  const exec = regexProto.exec as Method;
  saved.exec = exec;
  regexProto.exec = function (this: unknown, input: unknown) {
    const re = this as RegExp;
    const start = re.global || re.sticky ? re.lastIndex : 0;
    const m = exec.call(re, input) as RegExpExecArray | null;
    if (recording && !recorded?.has(re)) {
      recorded?.add(re);
      recording.set(`${re.flags}/${re.source}`, { source: re.source, flags: re.flags });
    }
    if (active) work += (m ? m.index + m[0].length : re.sticky ? start : String(input).length) - start + 1;
    return m;
  };
}

function uninstall() {
  for (const [proto, saved] of originals) Object.assign(proto, saved);
  originals.clear();
}

/** The work `fn` does (see the header); `fn` must be synchronous. */
export function countWork(fn: () => void): number {
  work = 0;
  workCounter.steps = 0;
  install();
  active = true;
  try {
    fn();
  } finally {
    active = false;
    uninstall();
  }
  return work + workCounter.steps;
}

/** Every RegExp `fn` executes, once each (regex literals, `new RegExp`, those inside libraries). */
export function recordRegExps(fn: () => void): { source: string; flags: string }[] {
  recording = new Map();
  recorded = new WeakSet();
  install();
  try {
    fn();
    return [...recording.values()];
  } finally {
    uninstall();
    recording = undefined;
    recorded = undefined;
  }
}
