/**
 * The cost of the MCP protocol check (plugins/mcp-validate) and of bounding an audit record
 * (plugins/audit-chain/bounds.ts), in process CPU time:
 *
 *   npx tsx bench/typed-proxy/mcp-validate.ts          # BENCH_ITERATIONS=200000 by default
 *
 * Prints the one-off compile time of the four vendored schemas (what a service pays at load) and
 * the CPU µs per message checked, per kind of message and protocol version, then per record bounded.
 */
import { boundDetails, type Cut } from '../../plugins/audit-chain/bounds.ts';
import { McpProtocol, type ProtocolVersion } from '../../plugins/mcp-validate/protocol.ts';

const iterations = Number(process.env.BENCH_ITERATIONS ?? 200_000);

function cpuMs(run: () => void): number {
  const before = process.cpuUsage();
  run();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000;
}

let protocol!: McpProtocol;
const compileMs = cpuMs(() => {
  protocol = new McpProtocol({ nameMaxLength: 128, uriMaxLength: 8192 });
});
console.log(`compile at load (4 versions, every client method): ${compileMs.toFixed(0)} ms CPU`);

const messages: Record<string, Record<string, unknown>> = {
  'tools/call echo (valid)': {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'echo', arguments: { message: 'hello' } },
  },
  'tools/list (valid)': { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
  'resources/read (valid, uri format)': {
    jsonrpc: '2.0',
    id: 3,
    method: 'resources/read',
    params: { uri: 'demo://resource/static/document/architecture.md' },
  },
  'tools/call params [1,2] (refused)': { jsonrpc: '2.0', id: 4, method: 'tools/call', params: [1, 2] },
  'unknown method (envelope only)': { jsonrpc: '2.0', id: 5, method: 'foo/bar', params: { a: 1 } },
};

for (const version of ['2025-06-18', '2025-11-25'] as ProtocolVersion[]) {
  for (const [name, message] of Object.entries(messages)) {
    for (let i = 0; i < 10_000; i++) protocol.check(message, version); // warm-up
    const ms = cpuMs(() => {
      for (let i = 0; i < iterations; i++) protocol.check(message, version);
    });
    console.log(`${version}  ${name.padEnd(36)} ${((ms * 1000) / iterations).toFixed(2)} µs CPU / check`);
  }
}

const typical = {
  method: 'tools/call',
  tool: 'get-env',
  policy: 'default',
  session: 'a1b2',
  message: 'Policy violation',
};
const large = { method: 'tools/call', tool: 'x'.repeat(500 * 1024), claimed_session: 's'.repeat(8000) };
for (const [name, details] of Object.entries({ 'typical record': typical, '500 KiB tool name': large })) {
  const n = name === 'typical record' ? iterations : 200;
  const ms = cpuMs(() => {
    for (let i = 0; i < n; i++) boundDetails(details, {} as Cut);
  });
  console.log(`audit bounds, ${name.padEnd(20)} ${((ms * 1000) / n).toFixed(2)} µs CPU / record`);
}
