/**
 * The official MCP TypeScript SDK client, pointed at the typed proxy's JSON-RPC endpoint, talks
 * through it to the MCP reference server — spawned over stdio, and run with its streamable-HTTP
 * transport — lists tools and calls one, with validation applied to tools/call.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const root = join(import.meta.dirname, '../..');
const config = join(root, 'configs/typed-proxy.yaml');
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: 'switchyard-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/`)));
  return client;
}

function exercise(getUrl: () => string) {
  it('connects, lists tools and calls one through the proxy', async () => {
    const client = await connect(getUrl());
    try {
      const { tools } = await client.listTools();
      const names = tools.map((t) => t.name);
      expect(names).toContain('echo');
      expect(names).not.toContain('get-env'); // filtered by policy
      const result = await client.callTool({ name: 'echo', arguments: { message: 'through the proxy' } });
      expect((result.content as Array<{ text: string }>)[0]?.text).toContain('through the proxy');
    } finally {
      await client.close();
    }
  });

  it('a tools/call that fails schema validation is refused', async () => {
    const client = await connect(getUrl());
    try {
      await expect(client.callTool({ name: 'echo', arguments: { wrong: true } })).rejects.toThrow(
        /422|Schema validation failed/,
      );
    } finally {
      await client.close();
    }
  });
}

describe('MCP SDK client through the proxy to a stdio upstream', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(config, { warmupMs: 15000 });
  });
  afterAll(() => svc?.close());
  exercise(() => svc.url);
});

describe('MCP SDK client through the proxy to a streamable-HTTP upstream', () => {
  let svc: StartedService;
  let upstream: ChildProcess;
  beforeAll(async () => {
    const port = await freePort();
    upstream = spawn(process.execPath, [everything, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    await new Promise<void>((resolve, reject) => {
      upstream.stderr?.on('data', (d: Buffer) => {
        if (d.toString().includes('listening')) resolve();
      });
      upstream.once('exit', (code) => reject(new Error(`reference server exited ${code}`)));
    });
    svc = await startService(config, {
      warmupMs: 15000,
      set: [`upstreams.everything={kind: jsonrpc, url: "http://127.0.0.1:${port}/mcp", protocol: mcp}`],
    });
  });
  afterAll(async () => {
    await svc?.close();
    upstream?.kill();
  });
  exercise(() => svc.url);
});

describe('argument_errors: tool-result (MCP 2025-11-25, SEP-1303)', () => {
  let svc: StartedService;
  beforeAll(async () => {
    svc = await startService(config, { warmupMs: 15000, env: { PROXY_ARGUMENT_ERRORS: 'tool-result' } });
  });
  afterAll(() => svc?.close());

  it('invalid arguments come back as a tool error the model can read, not a protocol error', async () => {
    const client = await connect(svc.url);
    try {
      const result = await client.callTool({ name: 'echo', arguments: { wrong: true } });
      expect(result.isError).toBe(true);
      const text = (result.content as Array<{ type: string; text: string }>)[0];
      expect(text.type).toBe('text');
      expect(text.text).toMatch(/^Invalid arguments for tool "echo":/);
      expect(text.text).toContain('$.arguments');
      expect(text.text).not.toContain('Echo:'); // the upstream was not called
      const meta = (result._meta as Record<string, { stype: string; violations: unknown[] }>)[
        'io.switchyard/validation'
      ];
      expect(meta.stype).toBe('everything.echo');
      expect(meta.violations.length).toBeGreaterThan(0);
      // A valid call still reaches the tool.
      const ok = await client.callTool({ name: 'echo', arguments: { message: 'fine' } });
      expect(ok.isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });

  it('raw JSON-RPC: HTTP 200 with the tool error, counted as a schema violation', async () => {
    const res = await fetch(`${svc.url}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'echo', arguments: {} } }),
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 7, result: { isError: true } });
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(
      /switchyard_schema_violations_total\{stype="everything\.echo",mode="strict"[,}][^ ]* [1-9]/,
    );
  });

  it('a misspelt value is refused when the config loads', async () => {
    await expect(startService(config, { env: { PROXY_ARGUMENT_ERRORS: 'tool-results' } })).rejects.toThrow(
      /argument_errors/,
    );
  });
});
