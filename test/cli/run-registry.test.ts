/**
 * The run registry `serve` writes and the CLI reads: only from a private directory of this user
 * (in a shared /tmp another user could plant an entry pointing `--token` at their URL, or a link
 * that the write would follow).
 */
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findRun, listRuns, type RunEntry, recordRun } from '../../runtime/cli/run-registry.ts';

const entry = (service: string): RunEntry => ({
  service,
  pid: process.pid,
  config: '/x.yaml',
  url: 'http://127.0.0.1:1',
  admin: 'http://127.0.0.1:2',
  started_at: new Date().toISOString(),
});

describe('run registry', () => {
  it('records and finds a running service in a private directory, and removes it', () => {
    const env = { SWITCHYARD_RUN_DIR: join(mkdtempSync(join(tmpdir(), 'sy-runs-')), 'run') };
    const remove = recordRun([entry('alpha')], env);
    expect(findRun('alpha', env)).toMatchObject({ service: 'alpha', admin: 'http://127.0.0.1:2' });
    expect(listRuns(env).map((r) => r.service)).toEqual(['alpha']);
    remove();
    expect(findRun('alpha', env)).toBeUndefined();
  });

  it('ignores a directory others can write to: nothing written, nothing believed', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-runs-shared-'));
    chmodSync(dir, 0o777);
    const env = { SWITCHYARD_RUN_DIR: dir };
    // An entry planted by someone else, pointing the CLI (and its token) elsewhere.
    writeFileSync(join(dir, 'alpha.json'), JSON.stringify({ ...entry('alpha'), admin: 'http://evil.example' }));
    expect(findRun('alpha', env)).toBeUndefined();
    expect(listRuns(env)).toEqual([]);
    recordRun([entry('beta')], env);
    expect(existsSync(join(dir, 'beta.json'))).toBe(false);
  });

  it('does not follow a link planted in place of an entry', () => {
    const base = mkdtempSync(join(tmpdir(), 'sy-runs-link-'));
    const dir = join(base, 'run');
    mkdirSync(dir, { mode: 0o700 });
    const victim = join(base, 'victim.txt');
    writeFileSync(victim, 'keep me');
    symlinkSync(victim, join(dir, 'gamma.json'));
    recordRun([entry('gamma')], { SWITCHYARD_RUN_DIR: dir });
    expect(readFileSync(victim, 'utf8')).toBe('keep me');
  });
});
