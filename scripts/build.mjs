#!/usr/bin/env node
// `npm run build`: the runtime, plugins and client library compiled to dist/ (tsc, relative `.ts`
// imports rewritten to `.js`), with the files the code reads at run time next to it (JSON
// schemas, worker scripts). bin/switchyard.js runs dist/ where tsx is not installed (production:
// npm ci --omit=dev); see docs/operations.md, "Compiled build".
import { execFileSync } from 'node:child_process';
import { cpSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist');
const trees = ['runtime', 'plugins', 'lib'];
// Only what this build writes: dist/ai-client is scripts/build-ai-client.ts's.
for (const dir of trees) rmSync(join(out, dir), { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit' });
// What tsc does not emit but the code loads: worker entry points and data files.
const assets = new Set(['.mjs', '.json']);
for (const dir of trees) {
  cpSync(join(root, dir), join(out, dir), {
    recursive: true,
    filter: (src) => !extname(src) || assets.has(extname(src)),
  });
}
console.log(`built ${out}`);
