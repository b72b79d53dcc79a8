/**
 * A keep-alive HTTP/1.1 client on a raw socket, for tests that must know exactly when a request
 * went out and what happened to its connection (a reset, a close, `Connection: close`): one
 * request at a time, answers with a Content-Length.
 */
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * A request not written because the server had closed the connection before (an idle keep-alive
 * connection closed by a stopping service): nothing went out, the client opens a new connection.
 * Distinct from a close after the request was written, which is a lost request.
 */
export class NotSent extends Error {}

export class RawConnection {
  private buffer = Buffer.alloc(0);
  private waiting: { resolve(a: RawAnswer): void; reject(e: Error): void } | undefined;
  /** Set once the server closed its side or the socket failed. */
  closed: string | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on('data', (d: Buffer) => {
      this.buffer = Buffer.concat([this.buffer, d]);
      this.parse();
    });
    socket.on('error', (err: NodeJS.ErrnoException) => this.fail(err.code ?? err.message));
    socket.on('end', () => this.fail('closed by the server'));
    socket.on('close', () => this.fail('closed'));
  }

  static open(port: number): Promise<RawConnection> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.once('connect', () => {
        socket.off('error', reject);
        resolve(new RawConnection(socket));
      });
      socket.once('error', reject);
    });
  }

  /**
   * Sends a POST with a JSON body; resolves with the answer, rejects with the socket's error code
   * (with `NotSent` when the connection was closed before it, so nothing was written).
   * `declaredLength` announces more than is sent (a client that is still uploading).
   */
  post(path: string, body: unknown, headers: Record<string, string> = {}, declaredLength?: number): Promise<RawAnswer> {
    if (this.closed) return Promise.reject(new NotSent(`not sent: ${this.closed} before the request`));
    const text = JSON.stringify(body);
    const extra = Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('');
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject };
      this.socket.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n${extra}Content-Length: ${declaredLength ?? Buffer.byteLength(text)}\r\n\r\n${text}`,
      );
    });
  }

  close(): void {
    this.socket.destroy();
  }

  private parse(): void {
    const end = this.buffer.indexOf('\r\n\r\n');
    if (end < 0 || !this.waiting) return;
    const [statusLine, ...lines] = this.buffer.subarray(0, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (this.buffer.length < end + 4 + length) return;
    const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
    this.buffer = this.buffer.subarray(end + 4 + length);
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting.resolve({ status: Number(statusLine.split(' ')[1]), headers, body });
  }

  private fail(reason: string): void {
    this.closed ??= reason;
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.reject(new Error(reason));
  }
}
