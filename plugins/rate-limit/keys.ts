/**
 * How the rate-limit stage names the client of a request, and where it reads a per-caller limit.
 * Keys are namespaced (`ip:`, `caller:`, `header:`) so that a client can never borrow another
 * kind's bucket by choosing a value.
 */
import { compileStatePath, type GatewayContext } from '../../runtime/index.ts';

/** The counter key of a caller (`ctx.state.caller.id`), as the stage with `key: caller` uses it. */
export function callerKey(callerId: string): string {
  return `caller:${callerId}`;
}

/** Builds the function that names the client of a request. */
export function compileKey(spec: string | undefined): (ctx: GatewayContext) => string {
  const ip = (ctx: GatewayContext) => `ip:${ctx.ip}`;
  if (spec === 'ip') return ip;
  if (spec === 'caller') return (ctx) => (ctx.state.caller ? callerKey(ctx.state.caller.id) : ip(ctx));
  if (spec?.startsWith('header:')) {
    const name = spec.slice('header:'.length);
    return (ctx) => {
      const value = ctx.get(name);
      return value ? `header:${value}` : ip(ctx);
    };
  }
  return (ctx) => (ctx.state.caller?.authenticated ? callerKey(ctx.state.caller.id) : ip(ctx));
}

/**
 * Builds the function that reads a limit from the request state along a dotted path (e.g.
 * `caller.attributes.requests_per_minute`). Only own properties are followed, and only a positive
 * integer counts as a limit: anything else (absent, 0, "60", 1.5) gives undefined, so that the
 * stage's own limit applies.
 */
export function compileLimitPath(path: string): (ctx: GatewayContext) => number | undefined {
  const read = compileStatePath(path);
  return (ctx) => {
    const value = read(ctx.state);
    return typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 ? value : undefined;
  };
}
