/**
 * One clear message for a YAML syntax error. The parser reports a cascade (a missing `]` gives
 * three errors, the first pointing at the line before); only the first is the mistake, and it
 * is said in the operator's terms, at the place to fix: the unclosed bracket or quote, the key
 * whose value is followed by a more indented line, the tab.
 */
import type { LineCounter, YAMLError } from 'yaml';
import type { Position } from './source.ts';

export interface SyntaxProblem extends Position {
  message: string;
}

export function explainYamlError(error: YAMLError, text: string, lines: LineCounter): SyntaxProblem {
  const start = lines.linePos(error.pos[0]);
  const here = { line: start.line, column: start.col };
  const first = error.message.split('\n')[0] ?? error.message;
  switch (error.code) {
    case 'BAD_INDENT':
    case 'MISSING_CHAR': {
      const open = unclosed(text, error.pos[0]);
      if (open) {
        const pos = lines.linePos(open.offset);
        const what =
          open.char === '"' || open.char === "'" ? `the quoted string opened with ${open.char}` : `"${open.char}"`;
        return { line: pos.line, column: pos.col, message: `${what} here is never closed (YAML: ${first})` };
      }
      return { ...here, message: `indentation: ${first}` };
    }
    case 'BLOCK_AS_IMPLICIT_KEY':
    case 'MULTILINE_IMPLICIT_KEY': {
      const line = text.split('\n')[start.line - 1] ?? '';
      const key = /^\s*(?:-\s+)?([^\s:#][^:#]*?):\s+\S/.exec(line)?.[1];
      const next = nextContentLine(text, start.line);
      if (key !== undefined && next && next.column > line.search(/\S/) + 1) {
        return {
          line: next.line,
          column: next.column,
          message:
            `this line is indented under "${key}" (line ${start.line}), which already has a value there: ` +
            'indent it like its sibling keys, or write the value of the key on indented lines only',
        };
      }
      return { ...here, message: 'this line is not "key: value" (a missing ": " after the key?)' };
    }
    case 'TAB_AS_INDENT':
      return { ...here, message: 'a tab indents this line: YAML indents with spaces only' };
    case 'DUPLICATE_KEY':
      return { ...here, message: 'this key appears twice in the same mapping: one of them would be silently lost' };
    default:
      return { ...here, message: first };
  }
}

/** The innermost bracket or quote opened before `end` and not closed (comments skipped). */
function unclosed(text: string, end: number): { char: string; offset: number } | undefined {
  const stack: Array<{ char: string; offset: number }> = [];
  let quote: { char: string; offset: number } | undefined;
  for (let i = 0; i < Math.min(end, text.length); i++) {
    const c = text[i] as string;
    if (quote) {
      if (c === '\\' && quote.char === '"') i++;
      else if (c === quote.char) quote = undefined;
      continue;
    }
    if (c === '#' && (i === 0 || /\s/.test(text[i - 1] as string))) {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl;
    } else if ((c === '"' || c === "'") && (i === 0 || /[\s[{,:]/.test(text[i - 1] as string))) {
      quote = { char: c, offset: i };
    } else if (c === '[' || c === '{') {
      stack.push({ char: c, offset: i });
    } else if (c === ']' || c === '}') {
      stack.pop();
    }
  }
  return quote ?? stack.at(-1);
}

/** The first line after `line` (1-based) with something on it, and its first column. */
function nextContentLine(text: string, line: number): Position | undefined {
  const all = text.split('\n');
  for (let n = line; n < all.length; n++) {
    const content = all[n] ?? '';
    const column = content.search(/\S/);
    if (column >= 0 && !content.trimStart().startsWith('#')) return { line: n + 1, column: column + 1 };
  }
  return undefined;
}
