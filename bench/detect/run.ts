/**
 * `npm run eval:detect`: every detection family's evaluation, one after the other.
 *
 *   npm run eval:detect [-- <family>...] [-- --split val ...]
 *
 * A family is a file `bench/detect/<family>.ts` whose name is one lower-case word (letters and
 * digits: `injection.ts`, `secrets.ts`, `pii.ts`); helpers live in other files (`lib/`, names with
 * a `-` or `_`). Each family runs in its own process (`tsx bench/detect/<family>.ts`) with the
 * options given here that are not family names; the run fails if any family fails.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

const DIR = resolve(import.meta.dirname);
const families = readdirSync(DIR)
  .filter((f) => /^[a-z0-9]+\.ts$/.test(f) && f !== 'run.ts')
  .map((f) => f.slice(0, -3))
  .sort();
const args = process.argv.slice(2);
const chosen = args.filter((a) => families.includes(a));
const passed = args.filter((a) => !families.includes(a));
const unknown = passed.filter((a) => /^[a-z0-9]+$/.test(a) && !a.startsWith('-'));
if (unknown.length > 0 && chosen.length === 0) {
  console.error(`unknown detection family: ${unknown.join(', ')} (families: ${families.join(', ')})`);
  process.exit(2);
}
const run = chosen.length > 0 ? chosen : families;
const tsx = join(DIR, '../../node_modules/.bin/tsx');
let failed: string[] = [];
for (const family of run) {
  console.log(`\n===== ${family} =====`);
  const r = spawnSync(tsx, [join(DIR, `${family}.ts`), ...passed], { stdio: 'inherit' });
  if (r.status !== 0) failed = [...failed, family];
}
if (failed.length > 0) {
  console.error(`\nfailed: ${failed.join(', ')}`);
  process.exit(1);
}
