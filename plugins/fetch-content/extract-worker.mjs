// Entry point of an extraction worker thread: worker threads do not inherit the tsx loader of the
// main thread (bin/switchyard.js, vitest), so register it here before loading the TypeScript.
import { register } from 'tsx/esm/api';

register();
await import('./extract-worker.ts');
