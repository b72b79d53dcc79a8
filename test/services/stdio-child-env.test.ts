/**
 * Stdio children never see the gateway's secrets (issue 29, item 5). The typed proxy runs as it is
 * deployed (`switchyard serve configs/typed-proxy.yaml` in a process of its own) with its tokens,
 * the audit database URL and a provider key in its environment, and its MCP server replaced by a
 * fixture child that answers its whole environment to whoever asks (as the reference server's
 * get-env tool does). A client asking through the proxy, in a session of its own and without one,
 * gets PATH, HOME, the locale and time zone, what the upstream names in `inherit_env` and its
 * `env` map, and none of the secrets. The shipped config's reference server still starts and
 * answers with that environment.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { childEnvironment } from '../../runtime/upstreams/child-env.ts';
import { type ServiceProcess, spawnService } from '../helpers/service-process.ts';
import { postRpc } from '../helpers/services.ts';

const envChild = join(import.meta.dirname, '../fixtures/env-mcp-child.mjs');

/** What an operator keeps in the gateway's environment (values made up, shaped like the real ones). */
const secrets = {
  PROXY_TOKEN: 'proxy-token-5f1e2d3c4b5a69788796a5b4c3d2e1f0',
  PROXY_ADMIN_TOKEN: 'admin-token-0a1b2c3d4e5f60718293a4b5c6d7e8f9',
  AUDIT_DATABASE_URL: 'postgres://audit:s3cret-password@db.internal:5432/audit',
  OPENAI_API_KEY: 'sk-proj-0123456789abcdef0123456789abcdef',
  FILTER_ADMIN_TOKEN: 'filter-admin-9f8e7d6c5b4a39281706f5e4d3c2b1a0',
};

const dir = mkdtempSync(join(tmpdir(), 'stdio-env-'));
/** The gateway's environment besides the secrets. */
const env = {
  ...secrets,
  LANG: 'en_GB.UTF-8',
  LC_TIME: 'de_DE.UTF-8',
  TZ: 'Europe/Paris',
  TOOL_HOME: '/opt/tool',
  npm_config_registry: 'https://registry.example/',
  PROXY_AUDIT_PATH: join(dir, 'audit.db'),
};
let svc: ServiceProcess;
let reference: ServiceProcess;

beforeAll(async () => {
  const upstream =
    `{kind: stdio, command: node, args: [${JSON.stringify(envChild)}], protocol: mcp, ` +
    `inherit_env: [TOOL_HOME, "npm_config_*"], env: {GREETING: hello}}`;
  svc = await spawnService('configs/typed-proxy.yaml', { env, set: [`upstreams.everything=${upstream}`] });
  // The shipped config as it is: the MCP reference server under `node`, same secrets around it.
  reference = await spawnService('configs/typed-proxy.yaml', {
    env: { ...env, PROXY_AUDIT_PATH: join(dir, 'audit-ref.db') },
  });
}, 120_000);

afterAll(async () => {
  await svc?.stop();
  await reference?.stop();
});

function expectNoSecret(env: Record<string, string>): void {
  for (const [name, value] of Object.entries(secrets)) {
    expect(env[name], name).toBeUndefined();
    expect(JSON.stringify(env)).not.toContain(value);
  }
}

function expectWhatAProcessNeeds(child: Record<string, string>): void {
  expect(child.PATH).toBe(process.env.PATH);
  expect(child.HOME).toBe(process.env.HOME);
  expect(child).toMatchObject({ LANG: 'en_GB.UTF-8', LC_TIME: 'de_DE.UTF-8', TZ: 'Europe/Paris' });
  // Named by the upstream: `inherit_env` (a name and a prefix) and the `env` map.
  expect(child).toMatchObject({
    TOOL_HOME: '/opt/tool',
    npm_config_registry: 'https://registry.example/',
    GREETING: 'hello',
  });
  // Nothing else of the gateway's environment (what spawnService gives it): the allow-list only.
  const gateway = { ...process.env, LOG_FORMAT: 'json', ...env };
  const allowed = childEnvironment({ inherit_env: ['TOOL_HOME', 'npm_config_*'], env: { GREETING: 'hello' } }, gateway);
  expect(Object.keys(child).sort()).toEqual(Object.keys(allowed).sort());
  expect(Object.keys(child).length).toBeLessThan(Object.keys(gateway).length / 2);
}

describe('the environment of stdio children', () => {
  it("a session's child (its own initialize) holds no secret of the gateway", async () => {
    const res = await postRpc(
      `${svc.url}/`,
      {
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'attacker', version: '1' } },
      },
      { 'mcp-protocol-version': '2025-06-18' },
    );
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeTruthy();
    const body = (await res.json()) as { result: { instructions: string } };
    const env = JSON.parse(body.result.instructions) as Record<string, string>;
    expectNoSecret(env);
    expectWhatAProcessNeeds(env);
  });

  it("the gateway's own child (a sessionless JSON-RPC client) holds none either", async () => {
    const res = await postRpc(`${svc.url}/`, { jsonrpc: '2.0', id: 2, method: 'ping' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { env: Record<string, string> } };
    expectNoSecret(body.result.env);
    expectWhatAProcessNeeds(body.result.env);
  });

  it('the shipped config: the MCP reference server starts and answers with that environment', async () => {
    const health = await fetch(`${reference.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: 'healthy', upstream: 'connected' });
    const res = await postRpc(`${reference.url}/`, {
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'echo', arguments: { message: 'still here' } },
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ result: { content: [{ type: 'text', text: 'Echo: still here' }] } });
  });
});
