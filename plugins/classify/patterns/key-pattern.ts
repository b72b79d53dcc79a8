/**
 * What a key format's pattern says about its matches, read from the pattern itself: the literal
 * every match starts with, the shortest and longest match, the characters a match can hold, and
 * random matches (for tests and the evaluation). Patterns are a small linear-time subset of
 * regular expressions: literals, classes, groups with alternation, and bounded quantifiers (`?`,
 * `{n}`, `{m,n}`); no `*`, `+`, backreference or lookaround, so that they could run on a
 * linear-time engine (RE2) as they are. `parseKeyPattern` throws on anything else.
 */

type Node =
  | { kind: 'chars'; set: string } // one character out of `set` (a literal: one character)
  | { kind: 'seq'; items: Node[] }
  | { kind: 'alt'; options: Node[] }
  | { kind: 'repeat'; node: Node; min: number; max: number };

/** Printable ASCII, for negated classes. */
const PRINTABLE = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
const DIGITS = '0123456789';

export interface KeyPattern {
  /** The literal every match starts with ('' when the first character varies). */
  prefix: string;
  minLength: number;
  maxLength: number;
  /** Every character a match can hold. */
  chars: ReadonlySet<string>;
  /** The characters a match can start with. */
  first: ReadonlySet<string>;
  /** A random match, `pick(n)` giving an integer in [0, n); `longest` for the longest one. */
  generate(pick: (n: number) => number, longest?: boolean): string;
}

export function parseKeyPattern(source: string): KeyPattern {
  let at = 0;
  const fail = (why: string): never => {
    throw new Error(`key pattern ${JSON.stringify(source)} at ${at}: ${why}`);
  };

  function alternation(): Node {
    const options = [sequence()];
    while (source[at] === '|') {
      at++;
      options.push(sequence());
    }
    return options.length === 1 ? options[0] : { kind: 'alt', options };
  }

  function sequence(): Node {
    const items: Node[] = [];
    while (at < source.length && source[at] !== '|' && source[at] !== ')') items.push(quantified(atom()));
    return { kind: 'seq', items };
  }

  function atom(): Node {
    const c = source[at++];
    if (c === '(') {
      if (source.startsWith('?:', at)) at += 2;
      else if (source.startsWith('?<', at)) {
        const close = source.indexOf('>', at);
        if (close < 0) fail('unclosed group name');
        at = close + 1;
      } else if (source[at] === '?') fail('lookaround');
      const inner = alternation();
      if (source[at++] !== ')') fail('unclosed group');
      return inner;
    }
    if (c === '[') return { kind: 'chars', set: charClass() };
    if (c === '\\') return { kind: 'chars', set: escaped(source[at++]) };
    if (c === '.' || c === '*' || c === '+' || c === '^' || c === '$') fail(`unsupported ${c}`);
    return { kind: 'chars', set: c };
  }

  function escaped(c: string | undefined): string {
    if (c === undefined) return fail('trailing backslash');
    if (c === 'd') return DIGITS;
    if (/[1-9bBwWsS]/.test(c)) fail(`unsupported \\${c}`);
    return c;
  }

  function charClass(): string {
    const negated = source[at] === '^';
    if (negated) at++;
    let set = '';
    while (source[at] !== ']') {
      if (at >= source.length) fail('unclosed class');
      let c = source[at++];
      if (c === '\\') {
        const e = escaped(source[at++]);
        if (e.length > 1) {
          set += e;
          continue;
        }
        c = e;
      }
      if (source[at] === '-' && source[at + 1] !== ']' && at + 1 < source.length) {
        at++;
        let to = source[at++];
        if (to === '\\') to = escaped(source[at++]);
        for (let x = c.charCodeAt(0); x <= to.charCodeAt(0); x++) set += String.fromCharCode(x);
      } else set += c;
    }
    at++;
    if (negated) set = [...PRINTABLE].filter((x) => !set.includes(x)).join('');
    return [...new Set(set)].join('');
  }

  function quantified(node: Node): Node {
    const c = source[at];
    if (c === '*' || c === '+') fail('unbounded repetition');
    if (c === '?') {
      at++;
      return { kind: 'repeat', node, min: 0, max: 1 };
    }
    if (c === '{') {
      const m = /^\{(\d+)(?:,(\d+))?\}/.exec(source.slice(at));
      if (!m) return fail('unbounded or malformed {}');
      at += m[0].length;
      const min = Number(m[1]);
      const max = m[2] === undefined ? min : Number(m[2]);
      if (max < min) fail('{m,n} with n < m');
      return { kind: 'repeat', node, min, max };
    }
    return node;
  }

  const root = alternation();
  if (at !== source.length) fail('unbalanced )');

  const chars = new Set<string>();
  const collect = (n: Node): void => {
    if (n.kind === 'chars') for (const c of n.set) chars.add(c);
    else if (n.kind === 'seq') n.items.forEach(collect);
    else if (n.kind === 'alt') n.options.forEach(collect);
    else collect(n.node);
  };
  collect(root);

  return {
    prefix: literalPrefix(root),
    minLength: length(root, 'min'),
    maxLength: length(root, 'max'),
    chars,
    first: new Set(firstChars(root)),
    generate: (pick, longest = false) => generate(root, pick, longest),
  };
}

function length(n: Node, which: 'min' | 'max'): number {
  if (n.kind === 'chars') return 1;
  if (n.kind === 'seq') return n.items.reduce((s, i) => s + length(i, which), 0);
  if (n.kind === 'alt') {
    const ls = n.options.map((o) => length(o, which));
    return which === 'min' ? Math.min(...ls) : Math.max(...ls);
  }
  return length(n.node, which) * n[which];
}

/** The characters a match of `n` can start with ('' when it may be empty: then what follows). */
function firstChars(n: Node): string {
  if (n.kind === 'chars') return n.set;
  if (n.kind === 'alt') return n.options.map(firstChars).join('');
  if (n.kind === 'repeat') return firstChars(n.node);
  let out = '';
  for (const item of n.items) {
    out += firstChars(item);
    if (length(item, 'min') > 0) break;
  }
  return out;
}

/** The literal characters every match starts with. */
function literalPrefix(n: Node): string {
  if (n.kind === 'chars') return n.set.length === 1 ? n.set : '';
  if (n.kind === 'alt') return '';
  if (n.kind === 'repeat') {
    if (n.min !== n.max) return n.min > 0 ? literalPrefix(n.node) : '';
    const one = literalPrefix(n.node);
    return one.length === length(n.node, 'max') && one.length === length(n.node, 'min') ? one.repeat(n.min) : one;
  }
  let out = '';
  for (const item of n.items) {
    const p = literalPrefix(item);
    out += p;
    if (p.length !== length(item, 'min') || p.length !== length(item, 'max')) break;
  }
  return out;
}

function generate(n: Node, pick: (n: number) => number, longest: boolean): string {
  if (n.kind === 'chars') return n.set[pick(n.set.length)];
  if (n.kind === 'seq') return n.items.map((i) => generate(i, pick, longest)).join('');
  if (n.kind === 'alt') {
    if (!longest) return generate(n.options[pick(n.options.length)], pick, longest);
    const best = n.options.reduce((a, b) => (length(b, 'max') > length(a, 'max') ? b : a));
    return generate(best, pick, longest);
  }
  const count = longest ? n.max : n.min + pick(n.max - n.min + 1);
  let out = '';
  for (let i = 0; i < count; i++) out += generate(n.node, pick, longest);
  return out;
}
