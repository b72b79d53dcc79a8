/**
 * JSON-RPC response hooks on an SSE answer (MCP streamable HTTP): each event whose data is a
 * JSON-RPC response goes through the hooks; every other event (notifications, progress, pings)
 * passes untouched. Headers are gone by then, so a failing hook becomes a JSON-RPC error event
 * (fail closed).
 */
import {
  type GatewayContext,
  GatewayError,
  jsonrpcWire,
  type RpcResponseHook,
  type SseFilter,
} from '../../runtime/index.ts';
import { applyHooks } from './hooks.ts';

const { isRpcResponse } = jsonrpcWire;

type Message = Record<string, unknown>;

export interface RpcSseEvents {
  /** Each (possibly replaced) JSON-RPC response that went through. */
  response(msg: Message): void;
  hookError(err: unknown): void;
}

export function rpcHookFilter(hooks: RpcResponseHook[], ctx: GatewayContext, events: RpcSseEvents): SseFilter {
  return {
    async onEvent(event) {
      if (event.data === '') return { events: [event] };
      let msg: unknown;
      try {
        msg = JSON.parse(event.data);
      } catch {
        return { events: [event] };
      }
      if (!isRpcResponse(msg)) return { events: [event] };
      let replaced: Message;
      try {
        replaced = await applyHooks(msg, hooks, ctx);
      } catch (err) {
        events.hookError(err);
        const gw = err instanceof GatewayError;
        replaced = {
          jsonrpc: '2.0',
          id: msg.id,
          error: {
            code: -32603,
            message: gw ? err.message : 'Internal error',
            ...(gw && err.details ? { data: err.details } : {}),
          },
        };
      }
      events.response(replaced);
      return { events: [{ event: event.event, id: event.id, data: JSON.stringify(replaced) }] };
    },
  };
}
