#!/usr/bin/env node
// The switchyard command: registers tsx so the TypeScript sources run as they are.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../runtime/cli/main.ts');
const code = await main(process.argv.slice(2));
if (code >= 0) process.exit(code);
