/**
 * node:fs with the `globSync` Node 22 added, for the conformance suite on Node 20
 * (scripts/conformance-node20.mjs says why; remove both on Node 22). Enough of fs.globSync for the
 * suite's one use (`globSync('**\/checks.json', { cwd })`): patterns with `**`, `*` and `?`,
 * matched against the relative paths under `cwd`.
 */
import fs from 'node:fs';
import { sep } from 'node:path';

export * from 'node:fs';
export default fs;

function toRegExp(pattern) {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      // `**/` is any number of directories, a trailing `**` anything.
      const slash = pattern[i + 2] === '/';
      source += slash ? '(?:.*/)?' : '.*';
      i += slash ? 2 : 1;
    } else if (c === '*') source += '[^/]*';
    else if (c === '?') source += '[^/]';
    else source += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

export function globSync(pattern, options = {}) {
  const patterns = (Array.isArray(pattern) ? pattern : [pattern]).map(toRegExp);
  const cwd = options.cwd ?? '.';
  const paths = fs.readdirSync(cwd, { recursive: true }).map((p) => String(p).split(sep).join('/'));
  return paths.filter((p) => patterns.some((re) => re.test(p)));
}
