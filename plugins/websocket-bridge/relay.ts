/**
 * One bridged WebSocket: each text message is POSTed to the target route of the same service and
 * its answer relayed as frames. Messages are handled one at a time, in order, so the frames of
 * one answer never interleave with another's:
 *
 * - a streamed (SSE) answer: each `data:` payload as one frame (for a chat route, the
 *   chat.completion.chunk objects), then `{done: true, request_id}` (`data: [DONE]` is not relayed);
 * - a JSON answer: the body as one frame, then `{done: true, request_id}`;
 * - an HTTP error (400 safety_violation, 401, 429...): its JSON error body as one frame. A 401 then
 *   closes the socket with 1008: its credentials come from the handshake and cannot change;
 * - a message that is not a JSON object, or too many messages waiting: an error frame in the
 *   route's dialect, without calling the target.
 *
 * The socket stays open for the next message in every other case, until it has been idle (no
 * message from the client, no answer being relayed) for `idleMs`: then it is closed with 1000.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { type Agent, request } from 'undici';
import { type RawData, WebSocket } from 'ws';
import { GatewayError, openaiStreamData } from '../../runtime/index.ts';

export type Outcome = 'streamed' | 'refused' | 'invalid' | 'failed' | 'aborted';

export interface RelaySettings {
  /** Full URL of the target route, read per message (the listener's port is known once it is up). */
  targetUrl(): string;
  /** Fields set on every message before it is sent (e.g. `{stream: true}`). */
  force: Record<string, unknown>;
  /** Headers sent with every message: content type, the forwarded handshake headers. */
  headers: Record<string, string>;
  /** The handshake's request id; message n is sent as `<id>.<n>`. */
  requestId: string;
  /** Messages that may wait behind the one being answered. */
  maxQueued: number;
  /** Closes the socket after this long without a message or an answer in progress; 0: never. */
  idleMs: number;
  agent: Agent;
  renderError(err: GatewayError): { status: number; body: unknown };
  logger: Logger;
  count(outcome: Outcome): void;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

export class Relay {
  private queue: Promise<void> = Promise.resolve();
  private waiting = 0;
  private sequence = 0;
  private current: AbortController | undefined;

  constructor(
    private readonly ws: WebSocket,
    private readonly settings: RelaySettings,
  ) {
    ws.on('message', (data) => this.enqueue(data));
    // The client left: cancel the request being answered (the target route sees a client abort).
    ws.on('close', () => {
      this.current?.abort();
      if (this.idle) clearTimeout(this.idle);
    });
    this.armIdle();
  }

  private idle: NodeJS.Timeout | undefined;

  /** (Re)starts the idle bound; an idle socket only holds a slot of the upgraded-connections cap. */
  private armIdle(): void {
    if (this.idle) clearTimeout(this.idle);
    this.idle = undefined;
    if (this.settings.idleMs <= 0 || this.waiting > 0) return;
    this.idle = setTimeout(() => {
      if (this.waiting === 0) this.ws.close(1000, 'idle timeout');
    }, this.settings.idleMs).unref();
  }

  private enqueue(data: RawData): void {
    if (this.waiting > this.settings.maxQueued) {
      this.settings.count('invalid');
      this.sendError(
        new GatewayError('bad_request', 'Too many messages waiting on this socket: wait for the end frame', {
          code: 'too_many_pending',
          details: { max_queued: this.settings.maxQueued },
        }),
      );
      return;
    }
    this.waiting++;
    this.armIdle();
    this.queue = this.queue
      .then(() => this.relay(data))
      .finally(() => {
        this.waiting--;
        this.armIdle();
      });
  }

  private async relay(data: RawData): Promise<void> {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    const id = this.nextRequestId();
    const message = parseMessage(data);
    if (message instanceof GatewayError) {
      this.settings.count('invalid');
      this.sendError(message);
      return;
    }
    const controller = new AbortController();
    this.current = controller;
    try {
      const res = await request(this.settings.targetUrl(), {
        method: 'POST',
        dispatcher: this.settings.agent,
        signal: controller.signal,
        headers: { ...this.settings.headers, 'x-request-id': id },
        body: JSON.stringify({ ...message, ...this.settings.force }),
      });
      if (res.statusCode >= 400) {
        this.settings.count('refused');
        this.send(errorFrame(await res.body.text(), res.statusCode, this.settings));
        if (res.statusCode === 401) this.ws.close(1008, 'authentication failed');
        return;
      }
      if (String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        for await (const event of openaiStreamData(res.body)) this.send(event);
      } else {
        this.send(await res.body.text());
      }
      this.settings.count('streamed');
      this.send(JSON.stringify({ done: true, request_id: id }));
    } catch (err) {
      if (controller.signal.aborted) {
        this.settings.count('aborted');
        return;
      }
      this.settings.count('failed');
      this.settings.logger.warn({ err, request_id: id }, 'websocket relay failed');
      this.sendError(
        new GatewayError('upstream_error', 'The answer was cut before its end', { details: { request_id: id } }),
      );
    } finally {
      this.current = undefined;
    }
  }

  private nextRequestId(): string {
    const id = `${this.settings.requestId}.${++this.sequence}`;
    return id.length <= 128 ? id : randomUUID();
  }

  private send(frame: string): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(frame);
  }

  private sendError(err: GatewayError): void {
    this.send(JSON.stringify(this.settings.renderError(err).body));
  }
}

/** The message as a JSON object, or the error to answer it with. */
function parseMessage(data: RawData): Record<string, unknown> | GatewayError {
  const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    return new GatewayError('parse_error', 'The message is not valid JSON (UTF-8)');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return new GatewayError('bad_request', 'The message must be a JSON object (a chat request)');
  }
  return value as Record<string, unknown>;
}

/** The target's error body as it is when it is JSON (it is already in the service's dialect). */
function errorFrame(body: string, status: number, settings: RelaySettings): string {
  try {
    JSON.parse(body);
    return body;
  } catch {
    const err = new GatewayError('upstream_error', `The target route answered ${status}`, { details: { status } });
    return JSON.stringify(settings.renderError(err).body);
  }
}
