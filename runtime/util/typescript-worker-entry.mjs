// The entry of a worker thread started from a TypeScript module in the sources
// (typescript-worker.ts): registers tsx in this thread, then runs the module named by the last
// argument. The compiled build starts the module's .js directly and never loads this file.
const { register } = await import('tsx/esm/api');
register();
await import(/** @type {string} */ (process.argv.at(-1)));
