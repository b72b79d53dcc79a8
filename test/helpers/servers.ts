/**
 * Real servers for tests: the MCP reference server (over stdio or streamable HTTP), free and
 * ephemeral local ports, and waiting for a condition.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Server as HttpServer } from 'node:http';
import { type AddressInfo, createServer, type Server } from 'node:net';
import { resolve } from 'node:path';

/** The MCP reference server's entry point (`node <it> stdio` or `streamableHttp`). */
export const everythingServer = resolve(
  import.meta.dirname,
  '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
);

/** The reference server as a stdio upstream, in YAML flow style: `everything: ${everythingStdioYaml}`. */
export const everythingStdioYaml = `{ kind: stdio, command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(everythingServer)}, stdio] }`;

export async function freePort(): Promise<number> {
  const srv = createServer().listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = (srv.address() as AddressInfo).port;
  srv.close();
  await once(srv, 'close');
  return port;
}

/** Listens on 127.0.0.1 (an ephemeral port unless `port` is given); resolves to the base URL. */
export async function listenLocal(server: Server, port = 0): Promise<string> {
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes an HTTP server at once, dropping its keep-alive connections. */
export function closeNow(server: HttpServer): void {
  server.closeAllConnections();
  server.close();
}

/** Starts the reference server's streamableHttp transport on `port` (its endpoint is /mcp). */
export async function startEverythingHttp(port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [everythingServer, 'streamableHttp'], {
    env: { ...process.env, PORT: String(port) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  // It prints "... listening on port N" on stderr once it accepts connections.
  await new Promise<void>((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`reference server did not start: ${seen}`)), 15000);
    child.stderr?.on('data', (d) => {
      seen += d.toString();
      if (/listening on port/.test(seen)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`reference server exited (${code}): ${seen}`)));
  });
  return child;
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGKILL');
  await once(child, 'exit');
}

export async function until(check: () => boolean | Promise<boolean>, timeoutMs = 10000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}
