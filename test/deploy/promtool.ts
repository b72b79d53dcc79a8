/**
 * promtool (Debian's `prometheus` package) for the deployment tests: the result of a run, or why
 * it could not run. Without promtool the check is skipped with the reason shown, except under
 * CI=true, where it fails (.ci/run installs it).
 */
import { spawnSync } from 'node:child_process';
import { root } from '../helpers/deploy.ts';

export interface PromtoolRun {
  ok: boolean;
  output: string;
}

export const promtoolMissing: string | undefined = (() => {
  const probe = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return probe.error ? `promtool not available (${probe.error.message})` : undefined;
})();

export function promtool(args: string[]): PromtoolRun {
  const res = spawnSync('promtool', args, { cwd: root, encoding: 'utf8' });
  return { ok: res.status === 0, output: `${res.stdout}${res.stderr}` };
}
