#!/usr/bin/env node
// The switchyard command: registers tsx so the TypeScript sources run as they are.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../runtime/cli/main.ts');
const code = await main(process.argv.slice(2));
// Exit once stdout is flushed: a piped stdout is asynchronous and would be cut short.
if (code >= 0) process.stdout.write('', () => process.exit(code));
