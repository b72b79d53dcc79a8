/**
 * Maintenance tool: pins the upstream's tool definitions in the registry.
 *
 *   npx tsx plugins/stype-registry/pin-tools.ts [--dir configs/registry] [--write] [-- <command> <args...>]
 *
 * Spawns the MCP server over stdio (default: the reference server `server-everything stdio`),
 * initializes a session declaring every client capability (so capability-gated tools are listed
 * too), calls `tools/list`, and compares sha256(canonicalJson({name, description, inputSchema}))
 * of each live tool with the `pinned_tool_hash` of the SType that matches it. It prints one line
 * per tool (ok, drift, unpinned, unregistered, gone) and exits 1 when a pin differs. With
 * `--write` it updates `pinned_tool_hash` in the SType files instead (comments and layout kept):
 * run it after reviewing a tool change upstream, then review the diff.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';

export interface ToolDefinition {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  [key: string]: unknown;
}

/** The hash the registry pins: lower-case sha256 hex of the canonical {name, description, inputSchema}. */
export function toolHash(tool: ToolDefinition): string {
  return sha256Hex(canonicalJson({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));
}

export const referenceServer = {
  command: process.execPath,
  args: [createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js'), 'stdio'],
};

const clientCapabilities = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
  tasks: { requests: { sampling: { createMessage: {} }, elicitation: { create: {} } } },
};

/** Lists the tools of an MCP server spawned over stdio (newline-delimited JSON-RPC). */
export async function listStdioTools(
  command = referenceServer.command,
  args = referenceServer.args,
  timeoutMs = 15_000,
): Promise<ToolDefinition[]> {
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'ignore'] });
  const session = new StdioSession(child);
  const timer = setTimeout(
    () => session.fail(new Error(`no answer from ${command} within ${timeoutMs} ms`)),
    timeoutMs,
  );
  try {
    await session.request('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: clientCapabilities,
      clientInfo: { name: 'switchyard-pin-tools', version: '1.0.0' },
    });
    session.notify('notifications/initialized');
    const tools: ToolDefinition[] = [];
    let cursor: string | undefined;
    do {
      const page = (await session.request('tools/list', cursor ? { cursor } : {})) as {
        tools: ToolDefinition[];
        nextCursor?: string;
      };
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  } finally {
    clearTimeout(timer);
    child.kill();
  }
}

class StdioSession {
  private buffer = '';
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void }>();

  constructor(private readonly child: ChildProcess) {
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => this.receive(chunk));
    child.on('error', (err) => this.fail(err));
    child.on('exit', (code) => this.fail(new Error(`server exited (code ${code})`)));
  }

  request(method: string, params: unknown): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: '2.0', id, method, params });
    });
  }

  notify(method: string): void {
    this.send({ jsonrpc: '2.0', method });
  }

  fail(err: Error): void {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  private send(message: unknown): void {
    this.child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  private receive(chunk: string): void {
    this.buffer += chunk;
    for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (line === '') continue;
      const msg = JSON.parse(line) as { id?: number; method?: string; result?: unknown; error?: { message: string } };
      if (msg.method !== undefined && msg.id !== undefined) {
        // A request from the server (roots/list...): answer so that it does not wait on us.
        const result =
          msg.method === 'roots/list'
            ? { result: { roots: [] } }
            : { error: { code: -32601, message: 'not supported' } };
        this.send({ jsonrpc: '2.0', id: msg.id, ...result });
        continue;
      }
      const waiting = msg.id === undefined ? undefined : this.pending.get(msg.id);
      if (!waiting || msg.id === undefined) continue;
      this.pending.delete(msg.id);
      if (msg.error) waiting.reject(new Error(msg.error.message));
      else waiting.resolve(msg.result);
    }
  }
}

export interface PinStatus {
  tool: string;
  stype?: string;
  file?: string;
  status: 'ok' | 'drift' | 'unpinned' | 'unregistered' | 'gone';
  pinned?: string;
  live?: string;
}

interface PinnedFile {
  file: string;
  id: string;
  tool: string;
  pinned?: string;
}

async function pinnedFiles(dir: string): Promise<PinnedFile[]> {
  const stypes = join(dir, 'stypes');
  const out: PinnedFile[] = [];
  for (const name of (await readdir(stypes)).sort()) {
    if (!['.yaml', '.yml', '.json'].includes(extname(name))) continue;
    const file = join(stypes, name);
    const data = parseDocument(await readFile(file, 'utf8')).toJS() as {
      id: string;
      match?: { method: string; tool?: string };
      pinned_tool_hash?: string;
    };
    if (data.match?.method !== 'tools/call' || !data.match.tool) continue;
    out.push({ file, id: data.id, tool: data.match.tool, pinned: data.pinned_tool_hash?.replace(/^sha256:/, '') });
  }
  return out;
}

/** Compares the live tools with the pins of a registry directory. */
export async function comparePins(dir: string, tools: ToolDefinition[]): Promise<PinStatus[]> {
  const files = await pinnedFiles(dir);
  const byTool = new Map(files.map((f) => [f.tool, f]));
  const out: PinStatus[] = tools.map((t) => {
    const f = byTool.get(t.name);
    const live = toolHash(t);
    if (!f) return { tool: t.name, status: 'unregistered', live };
    const status = !f.pinned ? 'unpinned' : f.pinned === live ? 'ok' : 'drift';
    return { tool: t.name, stype: f.id, file: f.file, status, pinned: f.pinned, live };
  });
  const liveNames = new Set(tools.map((t) => t.name));
  for (const f of files) {
    if (!liveNames.has(f.tool)) out.push({ tool: f.tool, stype: f.id, file: f.file, status: 'gone', pinned: f.pinned });
  }
  return out;
}

/** Rewrites only the `pinned_tool_hash` line (or appends one), so the rest of the file stays as written. */
async function writePin(file: string, hash: string): Promise<void> {
  const text = await readFile(file, 'utf8');
  const line = `pinned_tool_hash: "${hash}"`;
  const next = /^pinned_tool_hash:.*$/m.test(text)
    ? text.replace(/^pinned_tool_hash:.*$/m, line)
    : `${text.replace(/\n*$/, '\n')}${line}\n`;
  await writeFile(file, next);
}

async function main(argv: string[]): Promise<number> {
  const sep = argv.indexOf('--');
  const own = sep >= 0 ? argv.slice(0, sep) : argv;
  const server = sep >= 0 ? argv.slice(sep + 1) : [];
  const dirFlag = own.indexOf('--dir');
  const dir = resolve(dirFlag >= 0 ? (own[dirFlag + 1] ?? '') : 'configs/registry');
  const write = own.includes('--write');
  const tools = server.length > 0 ? await listStdioTools(server[0], server.slice(1)) : await listStdioTools();
  const report = await comparePins(dir, tools);
  let drift = 0;
  for (const r of report) {
    console.log(`${r.status.padEnd(12)} ${r.tool.padEnd(34)} ${r.stype ?? '-'}${r.live ? ` ${r.live}` : ''}`);
    if (r.status === 'drift' || r.status === 'unpinned') {
      if (write && r.file && r.live) await writePin(r.file, r.live);
      else if (r.status === 'drift') drift++;
    }
  }
  if (write) console.log('pins written; review the diff before committing');
  return drift > 0 ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err) => {
      console.error((err as Error).message);
      process.exit(2);
    },
  );
}
