// Entry point of a worker thread. Worker threads do not inherit the main thread's tsx loader
// (bin/switchyard.js, vitest): next to the compiled session-worker.js (dist/, npm run build) this runs
// it; in the sources it registers tsx first and runs session-worker.ts.
import { existsSync } from 'node:fs';

const compiled = new URL('./session-worker.js', import.meta.url);
if (existsSync(compiled)) {
  await import(compiled.href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('./session-worker.ts');
}
