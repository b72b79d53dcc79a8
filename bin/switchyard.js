#!/usr/bin/env node
// The switchyard command. It runs the compiled build (dist/, `npm run build`) where tsx is not
// installed (a production install: npm ci --omit=dev), and the TypeScript sources through tsx
// where it is (development: always the code as edited). SWITCHYARD_RUN=dist|source chooses.
import { existsSync } from 'node:fs';
import { setFlagsFromString } from 'node:v8';

// V8 tuning for a gateway, before anything allocates (docs/architecture.md, "Process tuning").
// Allocation-site pretenuring moves per-request objects that happen to outlive one young-generation
// collection straight into the old generation; in a proxy with many requests in flight that makes
// every scavenge copy and promote what would have died young (measured: scavenges took 15% of the
// safety filter's CPU with it, 5% without). SWITCHYARD_V8_FLAGS replaces the list ('' = V8's defaults).
for (const flag of (process.env.SWITCHYARD_V8_FLAGS ?? '--no-allocation-site-pretenuring').split(/\s+/)) {
  if (flag) setFlagsFromString(flag);
}

const compiled = new URL('../dist/runtime/cli/main.js', import.meta.url);

async function tsxRegister() {
  try {
    return (await import('tsx/esm/api')).register;
  } catch {
    return undefined;
  }
}

async function loadMain() {
  const wanted = process.env.SWITCHYARD_RUN;
  const register = wanted === 'dist' ? undefined : await tsxRegister();
  if (register) {
    register();
    return import('../runtime/cli/main.ts');
  }
  if (wanted === 'source') throw new Error('SWITCHYARD_RUN=source needs tsx (npm install without --omit=dev)');
  if (!existsSync(compiled)) {
    throw new Error('no compiled build in dist/ and no tsx to run the sources: run `npm run build` (or `npm install`)');
  }
  return import(compiled.href);
}

let main;
try {
  ({ main } = await loadMain());
} catch (err) {
  process.stderr.write(`switchyard: ${err.message}\n`);
  process.exit(2);
}
const code = await main(process.argv.slice(2));
// Exit once stdout is flushed: a piped stdout is asynchronous and would be cut short.
if (code >= 0) process.stdout.write('', () => process.exit(code));
