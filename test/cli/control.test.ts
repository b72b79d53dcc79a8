/**
 * The command line an operator uses on a running stack: --help/--version and clean refusals,
 * `ps`, and `health | config | reload <service>` found by name, config file or URL — against real
 * `switchyard serve` processes.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '../..');
const bin = join(root, 'bin/switchyard.js');
const run = promisify(execFile);

const work = mkdtempSync(join(tmpdir(), 'switchyard-cli-'));
const runDir = join(work, 'run');
const configFile = join(work, 'cli-demo.yaml');
const TOKEN = 'cli-test-admin-token';
const OPS_TOKEN = 'cli-test-ops-token';

function config(answer: string): string {
  return `service: cli-demo
version: 4.5.6
listen: { port: 0 }
admin: { port: 0, token: "${TOKEN}" }
routes:
  - match: { method: GET, path: /hello }
    pipeline: [{ respond: { body: { hello: "${answer}" } } }]
  - match: { method: GET, path: "/admin/*rest" }
    pipeline: [{ ops-api: { token: "${OPS_TOKEN}" } }]
`;
}

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const { SWITCHYARD_ADMIN_URL: _u, SWITCHYARD_ADMIN_TOKEN: _t, ...base } = process.env;
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      env: { ...base, SWITCHYARD_RUN_DIR: runDir, ...env },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/** `switchyard serve` in its own process; resolves once it is recorded as running. */
async function serve(file: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [bin, 'serve', file], {
    env: { ...process.env, SWITCHYARD_RUN_DIR: runDir, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d) => {
    stderr += d;
  });
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`serve exited: ${stderr}`);
    if (/cli-demo: http:/.test(stderr)) return child;
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`serve did not start: ${stderr}`);
}

describe('switchyard command line', () => {
  let server: ChildProcess;

  beforeAll(async () => {
    writeFileSync(configFile, config('first'));
    server = await serve(configFile);
  }, 40_000);
  afterAll(() => {
    server?.kill('SIGKILL');
  });

  it('--help and --version answer on every command with exit 0', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage:/);
    const version = await cli(['--version']);
    expect(version).toMatchObject({
      code: 0,
      stdout: `switchyard ${JSON.parse((await import('node:fs')).readFileSync(join(root, 'package.json'), 'utf8')).version}\n`,
    });
    const commands = ['serve', 'validate', 'schema', 'ps', 'health', 'config', 'reload', 'admin'];
    // At once: each is a process loading the whole runtime (about 2 s of CPU from the sources).
    const answers = await Promise.all(commands.map((command) => cli([command, '--help'])));
    commands.forEach((command, i) => {
      const r = answers[i]!;
      expect(r.code, command).toBe(0);
      expect(r.stdout, command).toMatch(/usage:/);
      expect(r.stderr, command).toBe('');
    });
  }, 120_000);

  it('an unknown option or command is one line and exit 2, never a stack trace', async () => {
    for (const args of [
      ['serve', '--port', '3', 'x.yaml'],
      ['frobnicate'],
      ['health', 'cli-demo', '--bogus'],
      ['validate'],
    ]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stderr, args.join(' ')).toMatch(/^switchyard[ :].*--help\)$/m);
      expect(r.stderr).not.toMatch(/\n\s+at /);
    }
  }, 40_000);

  it('ps lists the running service with its URLs', async () => {
    const r = await cli(['ps', '--json']);
    expect(r.code).toBe(0);
    const runs = JSON.parse(r.stdout) as Array<{ service: string; pid: number; url: string; admin: string }>;
    expect(runs).toEqual([expect.objectContaining({ service: 'cli-demo', pid: server.pid, config: configFile })]);
    const hello = await fetch(`${runs[0]?.url}/hello`);
    expect(await hello.json()).toEqual({ hello: 'first' });
  });

  it('health by name, by config file and by URL', async () => {
    const byName = await cli(['health', 'cli-demo'], { SWITCHYARD_ADMIN_TOKEN: TOKEN });
    expect(byName).toMatchObject({ code: 0 });
    expect(byName.stdout).toMatch(/^ok: \d+ of \d+ checks ok/);
    // The config file gives the admin token too.
    const byFile = await cli(['health', configFile, '--json']);
    expect(byFile.code).toBe(0);
    expect(JSON.parse(byFile.stdout)).toMatchObject({ status: 'ok' });
    const admin = (JSON.parse((await cli(['ps', '--json'])).stdout) as Array<{ admin: string }>)[0]?.admin;
    const byUrl = await cli(['config', admin as string, '--token', TOKEN]);
    expect(byUrl.code).toBe(0);
    expect(byUrl.stdout).toMatch(/^service\s+cli-demo 4\.5\.6$/m);
    expect(byUrl.stdout).toMatch(/GET \/hello\s+simple\s+respond/);
  });

  it('a wrong token is refused with exit 2; an unknown service names the running ones', async () => {
    const wrong = await cli(['health', 'cli-demo', '--token', 'nope']);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toMatch(/401 .*--token/);
    const unknown = await cli(['health', 'no-such-service']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('no running service named "no-such-service" (running: cli-demo)');
  });

  it('reload: a changed config is swapped in; a broken one is refused and the old one keeps serving', async () => {
    writeFileSync(configFile, config('second'));
    const ok = await cli(['reload', 'cli-demo', '--token', TOKEN]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^reloaded \([0-9a-z:]+ -> [0-9a-z:]+\)$/m);
    const url = (JSON.parse((await cli(['ps', '--json'])).stdout) as Array<{ url: string }>)[0]?.url;
    expect(await (await fetch(`${url}/hello`)).json()).toEqual({ hello: 'second' });

    writeFileSync(configFile, config('third').replace('respond:', 'respnd:'));
    // A broken file gives no token: it comes from the command line then.
    const refused = await cli(['reload', configFile, '--token', TOKEN]);
    expect(refused.code).toBe(1);
    expect(refused.stdout).toMatch(/^reload refused, the running config is unchanged/);
    expect(refused.stdout).toContain('respnd');
    expect(await (await fetch(`${url}/hello`)).json()).toEqual({ hello: 'second' });
    writeFileSync(configFile, config('second'));
  }, 40_000);

  it('admin finds the service by name or config file; the config file gives the ops-api token', async () => {
    const byFile = await cli(['admin', 'status', '--service', configFile]);
    expect(byFile.stderr).toBe('');
    expect(byFile.code).toBe(0);
    expect(byFile.stdout).toMatch(/^version\s+4\.5\.6$/m);
    const byName = await cli(['admin', 'status', '--service', 'cli-demo', '--json'], {
      SWITCHYARD_ADMIN_TOKEN: OPS_TOKEN,
    });
    expect(byName.code).toBe(0);
    expect(JSON.parse(byName.stdout)).toMatchObject({ version: '4.5.6' });
    const both = await cli(['admin', 'status', '--service', 'cli-demo', '--url', 'http://127.0.0.1:1']);
    expect(both.code).toBe(2);
  });

  it('the record goes away when the service stops', async () => {
    const stopped = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    await stopped;
    expect(readdirSync(runDir)).toEqual([]);
    const r = await cli(['ps']);
    expect(r.stdout).toMatch(/no service is running/);
  }, 40_000);
});
