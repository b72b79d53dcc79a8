/**
 * Applies response hooks to an SSE stream event by event: each event whose `data:` is a JSON-RPC
 * response is passed through the hooks and written back (its `id:`/`event:` lines kept); every
 * other event (notifications, progress, pings, comments) goes through byte for byte. Nothing
 * waits for the end of the stream.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { type GatewayContext, GatewayError, type RpcResponseHook } from '../../runtime/index.ts';
import { applyHooks, isRpcResponse } from './hooks.ts';

type Message = Record<string, unknown>;

const EVENT_END = /\r\n\r\n|\n\n|\r\r/;
const LINE = /\r\n|\n|\r/;

export class SseHookTransform extends Transform {
  private buffer = '';
  private readonly decoder = new TextDecoder();

  constructor(
    private readonly hooks: RpcResponseHook[],
    private readonly ctx: GatewayContext,
    private readonly events: {
      /** Each (possibly replaced) JSON-RPC response that went through. */
      response(msg: Message): void;
      hookError(err: unknown): void;
    },
  ) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    this.drain().then(() => done(), done);
  }

  override _flush(done: TransformCallback): void {
    this.buffer += this.decoder.decode();
    this.drain()
      .then(async () => {
        if (this.buffer !== '') this.push(await this.rewrite(this.buffer, ''));
        done();
      })
      .catch(done);
  }

  private async drain(): Promise<void> {
    let m = EVENT_END.exec(this.buffer);
    while (m) {
      const event = this.buffer.slice(0, m.index);
      const separator = m[0];
      this.buffer = this.buffer.slice(m.index + separator.length);
      this.push(await this.rewrite(event, separator));
      m = EVENT_END.exec(this.buffer);
    }
  }

  private async rewrite(event: string, separator: string): Promise<string> {
    const original = event + separator;
    const lines = event.split(LINE);
    const data = lines.filter((l) => l === 'data' || l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, ''));
    if (data.length === 0) return original;
    let msg: unknown;
    try {
      msg = JSON.parse(data.join('\n'));
    } catch {
      return original;
    }
    if (!isRpcResponse(msg)) return original;
    const replaced = await this.applySafely(msg);
    this.events.response(replaced);
    const kept = lines.filter((l) => !(l === 'data' || l.startsWith('data:')));
    return [...kept, `data: ${JSON.stringify(replaced)}`].join('\n') + (separator ? '\n\n' : '');
  }

  /** Headers are gone by now: a failing hook becomes a JSON-RPC error event (fail closed). */
  private async applySafely(msg: Message): Promise<Message> {
    try {
      return await applyHooks(msg, this.hooks, this.ctx);
    } catch (err) {
      const gw = err instanceof GatewayError;
      this.events.hookError(err);
      return {
        jsonrpc: '2.0',
        id: msg.id,
        error: {
          code: -32603,
          message: gw ? err.message : 'Internal error',
          ...(gw && err.details ? { data: err.details } : {}),
        },
      };
    }
  }
}
