import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../runtime/errors.ts';
import { silentLogger } from '../../runtime/observability/logger.ts';
import { createUpstream } from '../../runtime/upstreams/create.ts';
import type { RpcUpstream } from '../../runtime/upstreams/types.ts';
import { everythingServer, until } from '../helpers/servers.ts';

const serverPath = everythingServer;
const deps = { logger: silentLogger, configDir: process.cwd() };

function echo(id: string | number, message: string) {
  return { jsonrpc: '2.0' as const, id, method: 'tools/call', params: { name: 'echo', arguments: { message } } };
}

describe('stdio upstream (MCP reference server as a child)', () => {
  let up: RpcUpstream;

  beforeAll(async () => {
    up = createUpstream(
      'everything',
      { kind: 'stdio', command: process.execPath, args: [serverPath, 'stdio'], restart: { initial_delay_ms: 50 } },
      deps,
    ) as RpcUpstream;
    await up.ready(15000);
  });
  afterAll(() => up.close());

  it('is connected once the MCP handshake is done, with its pid', () => {
    const h = up.health();
    expect(h.connected).toBe(true);
    expect(h.error).toBeUndefined();
    expect(h.detail).toMatchObject({ pid: expect.any(Number), restarts: 0 });
  });

  it('lists tools and calls echo, with the caller id restored', async () => {
    const list = await up.call({ jsonrpc: '2.0', id: 'list-1', method: 'tools/list' });
    expect(list?.id).toBe('list-1');
    const tools = (list!.result as { tools: { name: string }[] }).tools.map((t) => t.name);
    expect(tools).toContain('echo');

    const res = await up.call(echo(7, 'hello'));
    expect(res).toMatchObject({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'Echo: hello' }] } });
  });

  it('keeps concurrent callers with the same id apart', async () => {
    const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => up.call(echo(1, `m${i}`))));
    answers.forEach((a, i) => {
      expect(a?.id).toBe(1);
      expect((a!.result as { content: { text: string }[] }).content[0].text).toBe(`Echo: m${i}`);
    });
  });

  it('writes notifications and resolves undefined', async () => {
    await expect(up.call({ jsonrpc: '2.0', method: 'notifications/roots/list_changed' })).resolves.toBeUndefined();
  });

  it('times out a slow call with upstream_timeout', async () => {
    const slow = {
      jsonrpc: '2.0' as const,
      id: 9,
      method: 'tools/call',
      params: { name: 'trigger-long-running-operation', arguments: { duration: 3, steps: 1 } },
    };
    const err = await up.call(slow, { timeoutMs: 200 }).catch((e) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.kind).toBe('upstream_timeout');
  });

  it('fails in-flight calls when the child dies, reports it, restarts it', async () => {
    const pid = up.health().detail?.pid as number;
    const inflight = up
      .call({
        jsonrpc: '2.0',
        id: 'slow',
        method: 'tools/call',
        params: { name: 'trigger-long-running-operation', arguments: { duration: 5, steps: 1 } },
      })
      .catch((e) => e);
    await new Promise((r) => setTimeout(r, 100));
    process.kill(pid, 'SIGKILL');

    const err = await inflight;
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.kind).toBe('upstream_error');
    const down = up.health();
    expect(down.connected).toBe(false);
    expect(down.error).toMatch(/killed by SIGKILL/);

    await until(() => up.health().connected);
    const again = up.health();
    expect(again.detail).toMatchObject({ restarts: 1 });
    expect(again.detail?.pid).not.toBe(pid);
    expect((await up.call(echo('x', 'back')))?.result).toBeDefined();
  });
});

describe('stdio upstream lifecycle', () => {
  it('reports why a crashing child is down and keeps restarting it', async () => {
    const up = createUpstream(
      'crashy',
      {
        kind: 'stdio',
        command: process.execPath,
        args: ['-e', 'process.exit(1)'],
        restart: { initial_delay_ms: 20, max_delay_ms: 40 },
      },
      deps,
    ) as RpcUpstream;
    try {
      await until(() => ((up.health().detail?.restarts as number) ?? 0) >= 2);
      const h = up.health();
      expect(h.connected).toBe(false);
      expect(h.error).toBe('child exited with code 1');
    } finally {
      await up.close();
    }
  });

  it('reports a command that cannot start', async () => {
    const up = createUpstream('missing', { kind: 'stdio', command: '/nonexistent/binary' }, deps) as RpcUpstream;
    try {
      await until(() => /failed to start/.test(up.health().error ?? ''));
      const err = await up.call(echo(1, 'x')).catch((e) => e);
      expect(err.kind).toBe('upstream_error');
    } finally {
      await up.close();
    }
  });

  it('close() stops the child for good', async () => {
    const up = createUpstream(
      'closing',
      { kind: 'stdio', command: process.execPath, args: [serverPath, 'stdio'] },
      deps,
    ) as RpcUpstream;
    await up.ready(15000);
    const pid = up.health().detail?.pid as number;
    await up.close();
    expect(() => process.kill(pid, 0)).toThrow();
    expect(up.health().connected).toBe(false);
    const err = await up.call(echo(1, 'x')).catch((e) => e);
    expect(err.kind).toBe('upstream_error');
  });

  it('runs a plain JSON-RPC child with env and cwd from the config', async () => {
    const script =
      "require('readline').createInterface({input:process.stdin}).on('line',l=>{const m=JSON.parse(l);" +
      "if(m.id!==undefined)process.stdout.write(JSON.stringify({jsonrpc:'2.0',id:m.id,result:{env:process.env.GREETING,cwd:process.cwd()}})+'\\n')})";
    const up = createUpstream(
      'plain',
      {
        kind: 'stdio',
        command: process.execPath,
        args: ['-e', script],
        protocol: 'jsonrpc',
        env: { GREETING: 'hi' },
        cwd: 'test',
      },
      deps,
    ) as RpcUpstream;
    try {
      await up.ready(5000);
      const res = await up.call({ jsonrpc: '2.0', id: 'q', method: 'anything' });
      expect(res).toEqual({ jsonrpc: '2.0', id: 'q', result: { env: 'hi', cwd: `${process.cwd()}/test` } });
    } finally {
      await up.close();
    }
  });
});
