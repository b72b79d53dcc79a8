/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance, every server scenario:
 * `--suite all`, the active ones and the pending ones) run against its reference server directly,
 * as the baseline, and then through the real typed proxy (configs/typed-proxy.yaml, upstream
 * overridden to that server over streamable HTTP): every check that passes directly passes through
 * the proxy, and none fails,
 * - in permissive mode,
 * - in strict mode with a registry for that server (test/fixtures/conformance/registry: every tool
 *   typed and pinned, its resources and prompts), so each message is validated and still passes,
 * - in strict mode with the shipped registry, which describes another server
 *   (@modelcontextprotocol/server-everything): exactly its resources/read and prompts/get STypes
 *   refuse the reference server's URIs and prompt names, with -32602, and nothing else fails.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import {
  type ConformanceCheck,
  checksWith,
  describeFailures,
  runConformance,
  startConformanceServer,
} from '../helpers/conformance.ts';
import { stop } from '../helpers/servers.ts';
import { postRpc } from '../helpers/services.ts';

const root = join(import.meta.dirname, '../..');
const config = join(root, 'configs/typed-proxy.yaml');
const conformanceRegistry = join(root, 'test/fixtures/conformance/registry');

describe('official MCP conformance suite, direct and through the typed proxy', () => {
  let upstream: { url: string; child: ChildProcess };
  let direct: ConformanceCheck[];
  const audit = mkdtempSync(join(tmpdir(), 'sy-conformance-audit-'));

  function proxy(mode: 'permissive' | 'strict', extra: string[] = []): Promise<StartedService> {
    return startService(config, {
      warmupMs: 15_000,
      env: { PROXY_AUDIT_PATH: join(audit, `${mode}-${extra.length}.db`) },
      set: [`upstreams.everything={kind: jsonrpc, url: "${upstream.url}", protocol: mcp}`, `mode=${mode}`, ...extra],
    });
  }

  /** The suite through a proxy, compared with the direct baseline. */
  function expectSameAsDirect(through: ConformanceCheck[]) {
    expect(describeFailures(through), 'checks failing through the proxy').toBe('');
    expect(checksWith(through, 'SUCCESS')).toEqual(checksWith(direct, 'SUCCESS'));
  }

  beforeAll(async () => {
    upstream = await startConformanceServer();
    direct = await runConformance(upstream.url);
  }, 120_000);
  afterAll(async () => {
    if (upstream) await stop(upstream.child);
  });

  it('baseline: the reference server passes every check directly', () => {
    expect(describeFailures(direct), 'checks failing against the reference server itself').toBe('');
    // The 0.1.16 suite: 30 active scenarios with 40 checks, 2 pending ones with 4 more.
    expect(checksWith(direct, 'SUCCESS').length).toBeGreaterThanOrEqual(44);
    expect(new Set(direct.map((c) => c.scenario)).size).toBeGreaterThanOrEqual(32);
  });

  it('permissive mode: every check passes through the proxy', async () => {
    const svc = await proxy('permissive');
    try {
      expectSameAsDirect(await runConformance(`${svc.url}/`));
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('strict mode with a registry for the reference server: every check passes, each message typed', async () => {
    const registry = `resources.registry={type: stype-registry, dir: ${JSON.stringify(conformanceRegistry)}, namespace: conformance}`;
    const svc = await proxy('strict', [registry]);
    try {
      expectSameAsDirect(await runConformance(`${svc.url}/`));
      // The registry is the one enforced: arguments its SType refuses never reach the tool.
      const res = await postRpc(`${svc.url}/`, {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'json_schema_2020_12_tool', arguments: { address: 'not an object' } },
      });
      const body = await res.json();
      expect(body.error).toMatchObject({ code: -32602, data: { stype: 'conformance.json_schema_2020_12_tool' } });
    } finally {
      await svc.close();
    }
  }, 120_000);

  it('strict mode with the shipped registry: only what its STypes refuse fails', async () => {
    const svc = await proxy('strict');
    try {
      const through = await runConformance(`${svc.url}/`);
      const refused: Record<string, string> = {
        'resources-read-text': 'everything.resources.read',
        'resources-read-binary': 'everything.resources.read',
        'resources-templates-read': 'everything.resources.read',
        'prompts-get-simple': 'everything.prompts.get',
        'prompts-get-with-args': 'everything.prompts.get',
        'prompts-get-embedded-resource': 'everything.prompts.get',
        'prompts-get-with-image': 'everything.prompts.get',
      };
      const failed = through.filter((c) => c.status === 'FAILURE');
      expect(failed.map((c) => c.scenario).sort(), describeFailures(through)).toEqual(Object.keys(refused).sort());
      for (const c of failed) {
        // The shipped STypes allow only demo://resource/… URIs and the four prompts of server-everything.
        expect(c.errorMessage).toContain('"code":-32602');
        expect(c.errorMessage).toContain(`"stype":"${refused[c.scenario]}"`);
      }
      // Everything else passes as it does directly.
      const others = (checks: ConformanceCheck[]) =>
        checksWith(
          checks.filter((c) => !(c.scenario in refused)),
          'SUCCESS',
        );
      expect(others(through)).toEqual(others(direct));
    } finally {
      await svc.close();
    }
  }, 120_000);
});
