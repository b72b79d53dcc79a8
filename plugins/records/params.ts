/**
 * Query and path parameters, read as FastAPI reads them: integers must be written as integers
 * (`int_parsing` otherwise), bounds give `greater_than_equal` / `less_than_equal`, and a
 * repeated parameter takes its last value. Problems are collected as issues (see issues.ts).
 */
import { issue, type ValidationIssue } from './issues.ts';

export type QueryValues = Record<string, string | string[] | undefined>;

const integer = /^[+-]?\d{1,20}$/;

function last(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.at(-1) : value;
}

export interface IntegerParam {
  default?: number;
  minimum?: number;
  maximum?: number;
}

/** An integer from a query string or path segment, or `spec.default` when absent. */
export function integerParam(
  raw: string | string[] | undefined,
  loc: Array<string | number>,
  spec: IntegerParam,
  issues: ValidationIssue[],
): number | undefined {
  const text = last(raw);
  if (text === undefined || (text === '' && loc[0] === 'query')) return spec.default;
  const n = Number(text);
  if (!integer.test(text) || !Number.isSafeInteger(n)) {
    if (integer.test(text)) {
      issues.push(
        issue('less_than_equal', loc, `Input should be less than or equal to ${Number.MAX_SAFE_INTEGER}`, text),
      );
    } else {
      issues.push(
        issue('int_parsing', loc, 'Input should be a valid integer, unable to parse string as an integer', text),
      );
    }
    return undefined;
  }
  if (spec.minimum !== undefined && n < spec.minimum) {
    issues.push(
      issue('greater_than_equal', loc, `Input should be greater than or equal to ${spec.minimum}`, text, {
        ge: spec.minimum,
      }),
    );
    return undefined;
  }
  if (spec.maximum !== undefined && n > spec.maximum) {
    issues.push(
      issue('less_than_equal', loc, `Input should be less than or equal to ${spec.maximum}`, text, {
        le: spec.maximum,
      }),
    );
    return undefined;
  }
  return n;
}

/** A string from a query string (last value when repeated); undefined when absent or empty. */
export function stringParam(
  raw: string | string[] | undefined,
  loc: Array<string | number>,
  maxLength: number,
  issues: ValidationIssue[],
): string | undefined {
  const text = last(raw);
  if (text === undefined || text === '') return undefined;
  if ([...text].length > maxLength) {
    issues.push(
      issue('string_too_long', loc, `String should have at most ${maxLength} characters`, text, {
        max_length: maxLength,
      }),
    );
    return undefined;
  }
  return text;
}

/** One of `choices` (default when absent). */
export function choiceParam<T extends string>(
  raw: string | string[] | undefined,
  loc: Array<string | number>,
  choices: readonly T[],
  fallback: T,
  issues: ValidationIssue[],
): T {
  const text = last(raw);
  if (text === undefined || text === '') return fallback;
  if ((choices as readonly string[]).includes(text)) return text as T;
  issues.push(
    issue('enum', loc, `Input should be ${choices.map((c) => `'${c}'`).join(', ')}`, text, {
      expected: choices.join(', '),
    }),
  );
  return fallback;
}
