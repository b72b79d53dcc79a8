#!/usr/bin/env node
// The switchyard command: registers tsx so the TypeScript sources run as they are.
import { setFlagsFromString } from 'node:v8';
import { register } from 'tsx/esm/api';

// V8 tuning for a gateway, before anything allocates (docs/architecture.md, "Process tuning").
// Allocation-site pretenuring moves per-request objects that happen to outlive one young-generation
// collection straight into the old generation; in a proxy with many requests in flight that makes
// every scavenge copy and promote what would have died young (measured: scavenges took 15% of the
// safety filter's CPU with it, 5% without). SWITCHYARD_V8_FLAGS replaces the list ('' = V8's defaults).
for (const flag of (process.env.SWITCHYARD_V8_FLAGS ?? '--no-allocation-site-pretenuring').split(/\s+/)) {
  if (flag) setFlagsFromString(flag);
}

register();
const { main } = await import('../runtime/cli/main.ts');
const code = await main(process.argv.slice(2));
// Exit once stdout is flushed: a piped stdout is asynchronous and would be cut short.
if (code >= 0) process.stdout.write('', () => process.exit(code));
