/**
 * The container image as CI can check it without a container runtime: the Dockerfile's stages,
 * user, healthcheck and copied paths; the entrypoint's command line for the deployment settings
 * (attacker-shaped values stay one argument each); and the systemd unit under systemd-analyze.
 * Building and running the image is described in docs/operations.md#deployment.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { entrypointCommand, readDeploy, root } from '../helpers/deploy.ts';

const dockerfile = readDeploy('docker/Dockerfile');
const instructions = dockerfile
  .replace(/\\\n/g, ' ')
  .split('\n')
  .filter((l) => l.trim() && !l.trim().startsWith('#'));

describe('deploy/docker/Dockerfile', () => {
  it('builds in stages and runs as a numeric non-root user with a healthcheck and the entrypoint', () => {
    const stages = instructions.filter((l) => l.startsWith('FROM '));
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const runtime = instructions.slice(instructions.indexOf(stages.at(-1)!));
    const user = runtime.find((l) => l.startsWith('USER '))?.split(/\s+/)[1];
    expect(user).toMatch(/^[1-9]\d*:[1-9]\d*$/);
    expect(runtime.some((l) => l.startsWith('HEALTHCHECK ') && l.includes('deploy/docker/healthcheck.js'))).toBe(true);
    expect(runtime.find((l) => l.startsWith('ENTRYPOINT '))).toContain('deploy/docker/entrypoint.sh');
    // No compiler in the runtime stage: production dependencies come from the build stage.
    expect(runtime.join('\n')).not.toMatch(/apt-get install|npm (ci|install)/);
  });

  it('copies paths that exist, keeps secrets and local data out of the context, runs the entry point it names', () => {
    for (const line of instructions.filter((l) => l.startsWith('COPY ') && !l.includes('--from='))) {
      for (const src of line.split(/\s+/).slice(1, -1)) expect(existsSync(join(root, src)), line).toBe(true);
    }
    const main = dockerfile.match(/SWITCHYARD_MAIN=(\S+)/)?.[1];
    expect(main && existsSync(join(root, main))).toBe(true);
    const ignored = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n');
    for (const path of ['node_modules', '.data', 'deploy/.env', '.env', '.git']) expect(ignored).toContain(path);
  });
});

describe('deploy/docker/entrypoint.sh', () => {
  it('serves SWITCHYARD_CONFIG and passes its arguments on', () => {
    expect(
      entrypointCommand({ SWITCHYARD_CONFIG: 'configs/ranking.yaml' }, ['--set', 'limits.max_concurrent=8']),
    ).toEqual(['node', 'bin/switchyard.js', 'serve', 'configs/ranking.yaml', '--set', 'limits.max_concurrent=8']);
    expect(entrypointCommand({})).toEqual(['node', 'bin/switchyard.js', 'serve', 'configs/typed-proxy.yaml']);
  });

  it('turns the deployment settings into overrides', () => {
    const cmd = entrypointCommand({
      SWITCHYARD_HOSTS_ALLOW: 'gateway,typed-proxy',
      AUDIT_DATABASE_URL: 'postgres://u:p%40ss@db:5432/sy',
      SWITCHYARD_TRUST_PROXY: 'true',
      SWITCHYARD_MAIN: 'dist/switchyard.js',
    });
    expect(cmd.slice(0, 4)).toEqual(['node', 'dist/switchyard.js', 'serve', 'configs/typed-proxy.yaml']);
    const sets = cmd.slice(4).filter((a) => a !== '--set');
    expect(sets).toEqual([
      'hosts.allow=[gateway,typed-proxy]',
      'resources.audit.backend=postgres',
      'resources.audit.url=postgres://u:p%40ss@db:5432/sy',
      'trust_proxy=true',
    ]);
    expect(entrypointCommand({ SWITCHYARD_TRUST_PROXY: 'yes' })).not.toContain('trust_proxy=true');
  });

  it('keeps any value one argument: no word splitting, globbing or command substitution', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary', minLength: 1 }).filter((s) => !s.includes('\0') && !s.includes('\n')),
        (url) => {
          const cmd = entrypointCommand({ AUDIT_DATABASE_URL: url, HOME: '/nonexistent' });
          expect(cmd.at(-1)).toBe(`resources.audit.url=${url}`);
          expect(cmd).toHaveLength(8);
        },
      ),
      { numRuns: 60 },
    );
  });
});

const analyze = spawnSync('systemd-analyze', ['--version'], { encoding: 'utf8' });
const noSystemd = analyze.error ? `systemd-analyze not available (${analyze.error.message})` : undefined;
if (noSystemd) console.warn(`${noSystemd}: deploy/systemd/switchyard@.service not verified`);

describe.skipIf(noSystemd !== undefined)('deploy/systemd/switchyard@.service', () => {
  it('passes systemd-analyze verify as an instance, with no unknown or bad setting', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-unit-'));
    const unit = join(dir, 'switchyard@typed-proxy.yaml.service');
    writeFileSync(unit, readDeploy('systemd/switchyard@.service'));
    const res = spawnSync('systemd-analyze', ['verify', unit], { encoding: 'utf8' });
    const about = `${res.stdout}${res.stderr}`.split('\n').filter((l) => l.includes(unit));
    expect(about).toEqual([]);
    expect(res.status).toBe(0);
    expect(readDeploy('systemd/switchyard@.service')).toMatch(/^ExecStart=.*serve \/opt\/switchyard\/configs\/%i$/m);
  });
});
