/**
 * The library for Node: everything of index.ts plus the file-backed storage adapter.
 */

export { FileStorage } from './file-storage.ts';
export * from './index.ts';
