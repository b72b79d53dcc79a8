/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance) and its reference server,
 * for tests: the suite's CLI run as a user runs it (on Node 20 through scripts/conformance-node20.mjs),
 * its per-check results read back from the checks.json files it writes.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const root = join(import.meta.dirname, '../..');
const cli = join(root, 'node_modules/@modelcontextprotocol/conformance/dist/index.js');
/** The 0.2.x suite (both MCP eras, `--requirements <revision>`), installed beside 0.1.16 under an alias. */
const cliNext = join(root, 'node_modules/conformance-next/dist/index.js');
const node20 = join(root, 'scripts/conformance-node20.mjs');
const referenceServer = join(root, 'test/fixtures/conformance/everything-server.ts');

export interface ConformanceCheck {
  scenario: string;
  id: string;
  /** SUCCESS and FAILURE count as passed and failed (as the CLI counts); WARNING and INFO do not. */
  status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | string;
  errorMessage?: string;
}

/** The suite's reference server (streamable HTTP, stateful) on a free port; resolves with its /mcp URL. */
export async function startConformanceServer(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', referenceServer], {
    cwd: root,
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`conformance server did not start: ${seen}`)), 30_000);
    const read = (d: Buffer) => {
      seen += d.toString();
      const m = /running on http:\/\/localhost:(\d+)/.exec(seen);
      if (m) {
        clearTimeout(timer);
        // It listens on 127.0.0.1 only: an address, not "localhost", which may resolve to ::1 first.
        resolve(`http://127.0.0.1:${m[1]}/mcp`);
      }
    };
    child.stdout?.on('data', read);
    child.stderr?.on('data', read);
    child.once('exit', (code) => reject(new Error(`conformance server exited (${code}): ${seen}`)));
  });
  // Keep reading so that its per-session logging never fills the pipe.
  child.stdout?.resume();
  return { url, child };
}

/**
 * Runs `conformance server --suite <suite> --url <url>` (0.1.16) and returns every check it
 * recorded. The CLI's exit code (1 when anything failed) is not used: the checks say what failed.
 */
export async function runConformance(url: string, suite = 'all', timeoutMs = 120_000): Promise<ConformanceCheck[]> {
  return runCli([cli, 'server', '--suite', suite, '--url', url], timeoutMs);
}

/**
 * Runs the 0.2.x suite's server scenarios that a protocol revision requires (`--requirements
 * 2025-11-25`, `2026-07-28`: frozen at the revision's release) and returns every check recorded.
 */
export async function runRequirements(url: string, revision: string, timeoutMs = 180_000): Promise<ConformanceCheck[]> {
  return runCli([cliNext, 'server', '--requirements', revision, '--url', url], timeoutMs);
}

async function runCli(args: string[], timeoutMs: number): Promise<ConformanceCheck[]> {
  const out = mkdtempSync(join(tmpdir(), 'sy-conformance-'));
  try {
    const child = spawn(process.execPath, ['--import', node20, ...args, '--output-dir', out], {
      cwd: out,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    const keep = (d: Buffer) => {
      log = (log + d.toString()).slice(-8000);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`conformance suite did not finish in ${timeoutMs} ms: ${log}`));
      }, timeoutMs);
      child.once('exit', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    // One directory per scenario: server-<scenario>-<ISO timestamp with - for : and .>.
    const checks: ConformanceCheck[] = [];
    for (const dir of readdirSync(out)) {
      const scenario = dir.replace(/^server-/, '').replace(/-\d{4}-\d\d-\d\dT[\d-]+Z$/, '');
      const file = join(out, dir, 'checks.json');
      // 0.2.x leaves a scenario that ended before any check (one that did not apply) without one.
      if (!existsSync(file)) continue;
      const list = JSON.parse(readFileSync(file, 'utf8')) as ConformanceCheck[];
      for (const c of list) checks.push({ scenario, id: c.id, status: c.status, errorMessage: c.errorMessage });
    }
    if (checks.length === 0) throw new Error(`the conformance suite recorded no checks: ${log}`);
    return checks;
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

/** `scenario/check-id` of the checks with `status`, sorted. */
export function checksWith(checks: ConformanceCheck[], status: string): string[] {
  return checks
    .filter((c) => c.status === status)
    .map((c) => `${c.scenario}/${c.id}`)
    .sort();
}

/** One line per failed check, for assertion messages. */
export function describeFailures(checks: ConformanceCheck[]): string {
  return checks
    .filter((c) => c.status === 'FAILURE')
    .map((c) => `${c.scenario}/${c.id}: ${(c.errorMessage ?? '').slice(0, 300)}`)
    .join('\n');
}
