import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { defineConfig } from 'vitest/config';

// Every Node process a test starts ends with the test process (test/helpers/exit-with-parent.mjs).
const exitWithParent = `--import=${join(import.meta.dirname, 'test/helpers/exit-with-parent.mjs')}`;

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two files at once even on two cores (vitest's default is one fewer than the cores): most
    // integration tests wait on sockets and child processes, which a second file can use.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    env: { NODE_OPTIONS: [process.env.NODE_OPTIONS, exitWithParent].filter(Boolean).join(' ') },
    reporters: ['default'],
  },
});
