/**
 * The answer to a request on a connection the tracker refused (connections.ts): `503` in the
 * service's dialect with `Retry-After` and `Connection: close`, instead of a reset the client
 * cannot tell from a crash (and that a client which already sent its request must treat as
 * "maybe done"). A body the client already sent is read first, up to a bound: closing a socket
 * with unread bytes in it sends a reset, which may reach the client before the answer does.
 */
import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Dialect } from '../dialects.ts';
import { GatewayError } from '../errors.ts';
import type { Refusal } from './connections.ts';

/** Seconds a refused client is told to wait: room is made within about that (reclaims, the slow-header bound). */
export const refusalRetryAfter = 1;
/** The most of a refused request's body read (and dropped) before answering; past it the answer goes at once. */
const drainBytes = 64 * 1024;

function refusalError(reason: Refusal): GatewayError {
  const message =
    reason === 'per_client'
      ? 'Too many connections from this client address while the service is near its connection limit; retry later'
      : 'The service is at its connection limit; retry later';
  const limit = reason === 'per_client' ? 'max_connections_per_client' : 'max_connections';
  return new GatewayError('overloaded', message, {
    details: { limit },
    headers: { 'Retry-After': String(refusalRetryAfter) },
  });
}

/** Answers `req` with the refusal, after reading what it sends of its body (up to `drainBytes`). */
export function answerRefusal(req: IncomingMessage, res: ServerResponse, reason: Refusal, dialect: Dialect): void {
  const rendered = dialect.render(refusalError(reason));
  const text = JSON.stringify(rendered.body);
  let answered = false;
  const answer = () => {
    if (answered) return;
    answered = true;
    res.writeHead(rendered.status, {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
      'Retry-After': String(refusalRetryAfter),
      Connection: 'close',
    });
    res.end(text);
  };
  let read = 0;
  req.on('data', (chunk: Buffer) => {
    read += chunk.length;
    if (read > drainBytes) answer();
  });
  req.once('end', answer);
  req.once('error', () => res.destroy());
  // Not invited (no 100 Continue): the body is not waited for.
  if (req.complete || /100-continue/i.test(req.headers.expect ?? '')) answer();
}

/** The same refusal on an upgrade request's raw socket (no response object there). */
export function answerRefusalRaw(socket: Duplex, reason: Refusal, dialect: Dialect): void {
  const rendered = dialect.render(refusalError(reason));
  const text = JSON.stringify(rendered.body);
  socket.end(
    `HTTP/1.1 ${rendered.status} ${STATUS_CODES[rendered.status] ?? 'Error'}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(text)}\r\nRetry-After: ${refusalRetryAfter}\r\nConnection: close\r\n\r\n${text}`,
  );
}
