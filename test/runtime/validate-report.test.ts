/**
 * `switchyard validate` (and every start and reload) as an operator meets it: every problem of a
 * file in one run, in file order, at the key that is wrong, with the name that was probably meant;
 * a YAML syntax error as one message at the place to fix.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadService } from '../../runtime/config/load.ts';
import type { ConfigProblem } from '../../runtime/config/source.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-validate-'));
let n = 0;

async function problemsOf(text: string): Promise<Array<Omit<ConfigProblem, 'file'>>> {
  const file = join(dir, `c${n++}.yaml`);
  writeFileSync(file, text);
  try {
    await loadService(file, { env: {} });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map(({ file: _f, ...p }) => p);
  }
  return [];
}

describe('every problem in one run', () => {
  it('a service-level mistake does not hide those in plugin options, and they come in file order', async () => {
    const problems = await problemsOf(`service: demo
listen: { port: 0 }
limits:
  max_concurent: 8
  body_bytes: lots
routes:
  - match: { path: /a }
    pipeline: [{ respnd: { body: {} } }]
  - match: { path: /b }
    pipeline: [{ respond: { body: {}, stauts: 201 } }]
resources:
  r: { type: classifer-set, classifiers: [] }
`);
    expect(problems).toEqual([
      {
        line: 4,
        column: 3,
        path: 'limits.max_concurent',
        message: 'unknown property (did you mean "max_concurrent"?)',
      },
      { line: 5, column: 15, path: 'limits.body_bytes', message: 'must be integer' },
      {
        line: 8,
        column: 18,
        path: 'routes[0].pipeline[0].respnd',
        message: 'unknown plugin "respnd" (did you mean "respond"?)',
      },
      {
        line: 10,
        column: 39,
        path: 'routes[1].pipeline[0].respond.stauts',
        message: 'unknown property (did you mean "status"?)',
      },
      {
        line: 12,
        column: 14,
        path: 'resources.r.type',
        message: 'unknown resource type "classifer-set" (did you mean "classifier-set"?)',
      },
    ]);
  });

  it('a key refused in its context is "not allowed here", at the key, with no branch noise', async () => {
    const problems = await problemsOf(`service: demo
listen: { port: 0 }
upstreams:
  a: { kind: http, url: "http://127.0.0.1:1", api_key_env: KEY }
  b:
    kind: http
    url: "http://127.0.0.1:2"
    endpoints: [{ url: "http://127.0.0.1:3" }]
routes: []
`);
    expect(problems).toEqual([
      { line: 4, column: 47, path: 'upstreams.a.api_key_env', message: 'not allowed here' },
      { line: 7, column: 5, path: 'upstreams.b.url', message: 'not allowed here' },
    ]);
  });

  it('suggests nothing when no known name is close', async () => {
    const problems = await problemsOf(`service: demo
listen: { port: 0 }
limits: { zzzzzzzz: 1 }
routes: []
`);
    expect(problems).toEqual([{ line: 3, column: 11, path: 'limits.zzzzzzzz', message: 'unknown property' }]);
  });
});

describe('YAML syntax errors: one message, at the place to fix', () => {
  const cases: Array<[string, string, number, number, RegExp]> = [
    ['an unclosed flow mapping', 'service: a\nlisten: { port: 1\nlimits: {}\n', 2, 9, /"\{" here is never closed/],
    ['an unclosed flow sequence', 'service: a\nroutes: [\n  x\nlimits: {}\n', 2, 9, /"\[" here is never closed/],
    ['an unclosed quote', 'service: "a\nlimits: {}\n', 1, 10, /quoted string opened with " here is never closed/],
    ['a tab', 'service: a\nlimits:\n\tbody_bytes: 1\n', 3, 1, /tab indents this line/],
    [
      'a line indented under a key with a value',
      'service: a\ndialect: simple\n  bad: 1\n',
      3,
      3,
      /indented under "dialect" \(line 2\)/,
    ],
    ['a missing colon', 'service a\nlimits: {}\n', 1, 1, /not "key: value"/],
    ['a duplicate key', 'service: a\nservice: b\n', 2, 1, /appears twice/],
  ];
  for (const [name, text, line, column, message] of cases) {
    it(name, async () => {
      const problems = await problemsOf(text);
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatchObject({ line, column });
      expect(problems[0]?.message).toMatch(/^YAML syntax: /);
      expect(problems[0]?.message).toMatch(message);
    });
  }
});
