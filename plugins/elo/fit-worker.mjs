// Entry point of a worker thread. Worker threads do not inherit the main thread's tsx loader
// (bin/switchyard.js, vitest): next to the compiled fit-worker.js (dist/, npm run build) this runs
// it; in the sources it registers tsx first and runs fit-worker.ts.
import { existsSync } from 'node:fs';

const compiled = new URL('./fit-worker.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./fit-worker.ts');
}
