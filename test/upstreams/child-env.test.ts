/**
 * The allow-list of a stdio child's environment (runtime/upstreams/child-env.ts): the base
 * variables, `inherit_env` names and prefixes, the `env` map over both; Windows names in any case.
 */
import { describe, expect, it } from 'vitest';
import { childEnvironment } from '../../runtime/upstreams/child-env.ts';

const gateway = {
  PATH: '/usr/bin',
  HOME: '/home/gw',
  LANG: 'C.UTF-8',
  LC_ALL: 'C.UTF-8',
  TZ: 'UTC',
  PROXY_TOKEN: 'secret',
  PROXY_ADMIN_TOKEN: 'secret',
  AUDIT_DATABASE_URL: 'postgres://u:p@h/db',
  OPENAI_API_KEY: 'sk-x',
  NODE_OPTIONS: '--max-old-space-size=4096',
  npm_config_cache: '/tmp/npm',
  npm_lifecycle_event: 'start',
  TOOL_HOME: '/opt/tool',
};

describe('childEnvironment', () => {
  it('keeps only what a process needs by default', () => {
    expect(childEnvironment({}, gateway, 'linux')).toEqual({
      PATH: '/usr/bin',
      HOME: '/home/gw',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
    });
  });

  it('adds the names and prefixes of inherit_env, and the env map wins over everything', () => {
    const env = childEnvironment(
      { inherit_env: ['TOOL_HOME', 'npm_config_*', 'UNSET'], env: { PATH: '/opt/tool/bin', GREETING: 'hi' } },
      gateway,
      'linux',
    );
    expect(env).toEqual({
      PATH: '/opt/tool/bin',
      HOME: '/home/gw',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      TOOL_HOME: '/opt/tool',
      npm_config_cache: '/tmp/npm',
      GREETING: 'hi',
    });
    expect(env).not.toHaveProperty('npm_lifecycle_event');
  });

  it('names are case-sensitive on POSIX, not on Windows (Path, SystemRoot), where the system variables pass too', () => {
    const windows = {
      Path: 'C:\\Windows',
      SystemRoot: 'C:\\Windows',
      ComSpec: 'cmd.exe',
      PROXY_TOKEN: 'secret',
      path_x: '1',
    };
    expect(childEnvironment({}, windows, 'win32')).toEqual({
      Path: 'C:\\Windows',
      SystemRoot: 'C:\\Windows',
      ComSpec: 'cmd.exe',
    });
    expect(childEnvironment({}, windows, 'linux')).toEqual({});
  });
});
