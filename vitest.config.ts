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
    // One file more than the cores (vitest's default is one fewer): most integration tests wait on
    // sockets and child processes, which another file can use. On 2 cores, 2026-11-30, quiet:
    // 3 files at once 395 s (173% CPU), 2 files 473 s (146% CPU), the same commit (issue 32).
    maxWorkers: Math.max(3, availableParallelism() + 1),
    env: { NODE_OPTIONS: [process.env.NODE_OPTIONS, exitWithParent].filter(Boolean).join(' ') },
    reporters: ['default'],
  },
});
