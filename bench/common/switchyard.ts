/**
 * A Switchyard service as a benchmark target: `node bin/switchyard.js serve <config>` from a
 * checkout, with `--set` overrides (ports, upstreams), pinned, optionally CPU-profiled, its
 * output to a log file, and awaited until `probe` succeeds. The compiled build (dist/) runs when
 * asked and present, as a production install does.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { type Started, start } from '../typed-proxy/children.ts';
import { waitUntilReady } from './harness.ts';

export interface ServiceStart {
  /** The checkout the service runs from (its bin/, dist/ or sources, node_modules). */
  dir: string;
  /** Config path, relative to `dir` (or absolute). */
  config: string;
  sets?: string[];
  env?: Record<string, string>;
  /** `dist` runs the compiled build when the checkout has one, else the sources through tsx. */
  run: 'dist' | 'source';
  cpu?: string;
  /** Node flags before the script (e.g. --cpu-prof). */
  nodeFlags?: string[];
  /** A command the node process runs under (e.g. `valgrind --tool=callgrind ...`): its argv before node's. */
  wrap?: string[];
  logFile: string;
  name: string;
  readyTimeoutMs: number;
  /** Succeeds once the service answers as the measurement expects. */
  probe: () => Promise<unknown>;
}

export async function startService(o: ServiceStart): Promise<Started> {
  const args = [
    ...(o.nodeFlags ?? []),
    'bin/switchyard.js',
    'serve',
    o.config,
    ...(o.sets ?? []).flatMap((x) => ['--set', x]),
  ];
  const [command, ...argv] = o.wrap?.length ? [...o.wrap, process.execPath, ...args] : [process.execPath, ...args];
  const s = start(command, argv, {
    cpu: o.cpu,
    cwd: o.dir,
    env: {
      ...process.env,
      // A checkout without a build (an older baseline) runs its sources.
      SWITCHYARD_RUN: o.run === 'dist' && existsSync(join(o.dir, 'dist/runtime/cli/main.js')) ? 'dist' : 'source',
      LOG_LEVEL: 'warn',
      LOG_FORMAT: 'json',
      ...o.env,
    },
    logFile: o.logFile,
  });
  await waitUntilReady(s, o.name, o.readyTimeoutMs, o.probe);
  return s;
}
