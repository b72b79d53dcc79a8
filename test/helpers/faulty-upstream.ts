/**
 * An HTTP/1.1 upstream that misbehaves on purpose, written on a raw TCP socket so that each fault
 * is exactly what goes on the wire: an answer cut halfway (JSON or an SSE stream), a reset after
 * the headers, a reset before any answer, no answer at all. The fault is chosen per test
 * (`upstream.fault = ...`); `ok` answers a well-formed JSON-RPC or OpenAI answer.
 */
import { once } from 'node:events';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';

export type Fault =
  | 'ok'
  | 'half-json'
  | 'half-sse'
  | 'stall-sse'
  | 'reset-after-headers'
  | 'reset'
  | 'hang'
  | 'hang-body';

export interface FaultyUpstream {
  url: string;
  port: number;
  fault: Fault;
  /** A request whose body contains this text is never answered, whatever the fault. */
  hangMarker?: string;
  /** Requests received so far. */
  requests: number;
  close(): Promise<void>;
}

const okJson = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  result: { content: [{ type: 'text', text: 'fine' }] },
});

export async function startFaultyUpstream(): Promise<FaultyUpstream> {
  const sockets = new Set<Socket>();
  const state: FaultyUpstream = {
    url: '',
    port: 0,
    fault: 'ok',
    requests: 0,
    close: async () => {
      for (const s of sockets) s.destroy();
      server.close();
      await once(server, 'close');
    },
  };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = '';
    socket.on('data', (chunk) => {
      buffered += chunk.toString('latin1');
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buffered.slice(0, end);
      const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (buffered.length < end + 4 + length) return;
      const body = buffered.slice(end + 4, end + 4 + length);
      buffered = buffered.slice(end + 4 + length);
      state.requests++;
      answer(socket, state.hangMarker && body.includes(state.hangMarker) ? 'hang' : state.fault, body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.port = (server.address() as AddressInfo).port;
  state.url = `http://127.0.0.1:${state.port}`;
  return state;
}

function answer(socket: Socket, fault: Fault, requestBody: string): void {
  const id = idOf(requestBody);
  const json = okJson.replace('"id":1', `"id":${JSON.stringify(id)}`);
  switch (fault) {
    case 'ok':
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`,
      );
      return;
    case 'half-json':
      // Declares the whole length, sends half, then closes: a buffered answer cut short.
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json.slice(0, json.length >> 1)}`,
      );
      socket.end();
      return;
    case 'half-sse':
      // A chunked event stream that stops mid-event and closes without the last chunk.
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(chunk(`data: ${json.slice(0, 20)}`));
      setTimeout(() => socket.end(), 20);
      return;
    case 'stall-sse':
      // An event stream that sends one whole event (a progress notification) and then nothing.
      socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n');
      socket.write(chunk('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n'));
      return;
    case 'reset-after-headers':
      socket.write(`HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\n\r\n`);
      setTimeout(() => socket.resetAndDestroy(), 20);
      return;
    case 'reset':
      socket.resetAndDestroy();
      return;
    case 'hang':
      return; // reads the request, never answers
    case 'hang-body':
      socket.write(
        `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ${json.length}\r\n\r\n${json.slice(0, 5)}`,
      );
      return;
  }
}

function chunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}

function idOf(body: string): unknown {
  try {
    return (JSON.parse(body) as { id?: unknown }).id ?? 1;
  } catch {
    return 1;
  }
}
