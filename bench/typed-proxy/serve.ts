/**
 * How a benchmark server process listens: on 127.0.0.1:$PORT (0 = ephemeral) with keep-alive long
 * enough that pooled connections are never closed mid-run, printing `listening <port>` (what
 * run.ts waits for), and closing cleanly on SIGTERM/SIGINT.
 */
import type { Server } from 'node:http';

export function serveForBench(server: Server, onClose: () => void = () => {}): void {
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 125_000;
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
    const address = server.address();
    console.log(`listening ${typeof address === 'object' && address ? address.port : address}`);
  });
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.on(signal, () => {
      server.closeAllConnections();
      server.close(() => process.exit(0));
      onClose();
    });
  }
}
