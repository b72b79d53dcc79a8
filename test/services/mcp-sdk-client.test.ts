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
