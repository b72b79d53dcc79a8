/**
 * `npm test` killed midway (a CI timeout, Ctrl-C) leaves no process behind holding ports: every
 * Node process a test starts carries test/helpers/exit-with-parent.mjs (vitest.config.ts) and
 * ends when the process that started it is gone, down the tree.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { until } from '../helpers/servers.ts';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('processes started by a test', () => {
  it('end when the process that started them is killed', async () => {
    expect(process.env.NODE_OPTIONS).toContain('exit-with-parent.mjs');
    // A parent (as a test worker or a cluster primary is) starting a child that would run forever.
    const parent = spawn(
      process.execPath,
      [
        '-e',
        `const c = require('node:child_process').spawn(process.execPath, ['-e', 'console.log(1); setInterval(() => {}, 1000)'], { stdio: ['ignore', 'pipe', 'ignore'] });
         c.stdout.once('data', () => console.log(c.pid)); setInterval(() => {}, 1000);`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    const [line] = await once(parent.stdout!, 'data'); // the child's pid, once the child runs
    const child = Number(String(line).trim());
    expect(alive(child)).toBe(true);
    parent.kill('SIGKILL');
    await once(parent, 'exit');
    await until(async () => !alive(child), 15_000);
    expect(alive(child)).toBe(false);
  });
});
