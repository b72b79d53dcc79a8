/**
 * Starts a worker thread from a TypeScript module, in the sources and in the compiled build alike.
 *
 * Why: worker threads do not inherit the main thread's tsx loader (bin/switchyard.js, vitest). In
 * the compiled build (dist/, `npm run build`) the module's `.js` sits next to where its `.ts` was
 * and runs as it is; in the sources a small entry (typescript-worker-entry.mjs) registers tsx in
 * the worker first, then imports the module. Give the `.ts` URL, as written next to the caller:
 * `startTypeScriptWorker(new URL('./fit-worker.ts', import.meta.url), { workerData })`.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

const entry = new URL('./typescript-worker-entry.mjs', import.meta.url);

export function startTypeScriptWorker(module: URL, options: WorkerOptions = {}): Worker {
  if (!module.pathname.endsWith('.ts')) throw new Error(`startTypeScriptWorker: ${module.href} is not a .ts module`);
  const compiled = compiledModule(module.href);
  if (compiled) return new Worker(new URL(compiled), options);
  return new Worker(entry, { ...options, argv: [...(options.argv ?? []), module.href] });
}

/**
 * The compiled `.js` the build put beside a `.ts` module (dist/), if there is one: what a thread
 * that runs the compiled build imports instead (a worker importing a module URL it was given).
 */
export function compiledModule(href: string): string | undefined {
  if (!href.endsWith('.ts')) return undefined;
  const compiled = href.replace(/\.ts$/, '.js');
  return existsSync(fileURLToPath(compiled)) ? compiled : undefined;
}
