/**
 * Whether regexes can run on V8's linear-time engine (Node's --enable-experimental-regexp-engine,
 * RegExp flag `l`): an automaton without backtracking, so no backreferences and no lookarounds.
 * That engine also refuses, for now, things that do not make matching costlier: the `i` and `u`
 * flags, property escapes (`\p{L}`), astral characters and repetition bounds over 16 (it unrolls
 * them). `forLinearCheck` rewrites those before the check, each into a construct of the same cost
 * for an automaton, so that what the check rejects is what makes a regex non-regular:
 * - `i` and `u` dropped, `\p{…}`/`\P{…}` as `\w`, `\u{…}` and astral characters as `\uFFFF`:
 *   one character matched against a set, whatever the set;
 * - `{m,n}`, `{m,}`, `{m}` as `*` or `+`: a bounded repetition is a finite automaton too;
 * - a lookaround of ONE character (`(?<![A-Za-z0-9])`, `(?!\d)`, `(?<![^\n])`) removed: it looks
 *   at one character beside the position, like `\b`, which the engine accepts.
 * Anything else (a backreference, a lookaround of more than one character) is kept, and fails.
 */
import { execFileSync } from 'node:child_process';

const LOOKAROUNDS = ['(?<!', '(?<=', '(?!', '(?='];

/** The length of the atom at `i` (a class, an escape or one character), 0 when there is none. */
function atomLength(source: string, i: number): number {
  const c = source[i];
  if (c === undefined || c === '(' || c === ')' || c === '|') return 0;
  if (c === '[') {
    let j = i + 1;
    if (source[j] === '^') j++;
    if (source[j] === ']') j++;
    for (; j < source.length && source[j] !== ']'; j++) if (source[j] === '\\') j++;
    return j + 1 - i;
  }
  if (c === '\\') {
    const next = source[i + 1];
    if ((next === 'u' || next === 'p' || next === 'P') && source[i + 2] === '{') return source.indexOf('}', i) + 1 - i;
    if (next === 'u') return 6;
    if (next === 'x') return 4;
    if (next === 'c') return 3;
    return 2;
  }
  return (c.codePointAt(0) ?? 0) > 0xffff ? 2 : 1;
}

/** Replaces the constructs the engine refuses but that cost an automaton nothing (see the header). */
function simplifyAtom(atom: string): string {
  return atom
    .replace(/\\[pP]\{[^}]*\}/g, '\\w')
    .replace(/\\u\{[0-9A-Fa-f]+\}/g, '\\uFFFF')
    .replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, '\\uFFFF');
}

/** `source` and `flags` rewritten for the linear engine (see the header). */
export function forLinearCheck(source: string, flags: string): { source: string; flags: string } {
  let out = '';
  for (let i = 0; i < source.length; ) {
    const look = LOOKAROUNDS.find((l) => source.startsWith(l, i));
    if (look) {
      const n = atomLength(source, i + look.length);
      if (n > 0 && source[i + look.length + n] === ')') {
        i += look.length + n + 1;
        continue;
      }
      out += look;
      i += look.length;
      continue;
    }
    if (source[i] === '{') {
      const q = /^\{(\d+)(,(\d*))?\}/.exec(source.slice(i));
      if (q) {
        out += Number(q[1]) === 0 ? '*' : '+';
        i += q[0].length;
        // a lazy or possessive mark after it stays valid after * and +
        continue;
      }
    }
    const n = atomLength(source, i) || 1;
    out += simplifyAtom(source.slice(i, i + n));
    i += n;
  }
  return { source: out, flags: flags.replace(/[iudv]/g, '') };
}

/** The regexes (as given) that V8's linear engine refuses after `forLinearCheck`, with its error. */
export function notLinear<R extends { source: string; flags: string }>(regexps: R[]): Array<R & { error: string }> {
  const checked = regexps.map((r) => ({ original: r, ...forLinearCheck(r.source, r.flags) }));
  const script = `
    const list = JSON.parse(require('node:fs').readFileSync(0, 'utf8'));
    const refused = [];
    for (const r of list) {
      try { new RegExp(r.source, r.flags + 'l'); } catch (e) { refused.push({ ...r.original, error: e.message }); }
    }
    process.stdout.write(JSON.stringify(refused));`;
  const output = execFileSync(process.execPath, ['--enable-experimental-regexp-engine', '-e', script], {
    input: JSON.stringify(checked),
    encoding: 'utf8',
  });
  return JSON.parse(output);
}
