/**
 * X-Forwarded-* of an upstream request: read from the socket and Host header directly in the common
 * case, they must equal what Koa's `ctx.ip`, `ctx.protocol` and `ctx.host` give, whatever the case.
 */
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import Koa from 'koa';
import { describe, expect, it } from 'vitest';
import { upstreamRequestHeaders } from '../../plugins/proxy/headers.ts';
import type { GatewayContext } from '../../runtime/index.ts';

function contextOf(opts: {
  proxy: boolean;
  headers: Record<string, string>;
  remoteAddress?: string;
  encrypted?: boolean;
  httpVersionMajor?: number;
}): GatewayContext {
  const app = new Koa();
  app.proxy = opts.proxy;
  const socket = new Socket();
  Object.defineProperty(socket, 'remoteAddress', { value: opts.remoteAddress });
  if (opts.encrypted) Object.defineProperty(socket, 'encrypted', { value: true });
  const req = new IncomingMessage(socket);
  req.headers = opts.headers;
  req.httpVersionMajor = opts.httpVersionMajor ?? 1;
  req.method = 'POST';
  req.url = '/';
  const ctx = app.createContext(req, new ServerResponse(req)) as unknown as GatewayContext;
  ctx.state = {} as GatewayContext['state'];
  return ctx;
}

const cases: Array<Parameters<typeof contextOf>[0]> = [
  { proxy: false, headers: { host: 'gw.example:8080' }, remoteAddress: '10.0.0.7' },
  { proxy: false, headers: { host: 'gw.example' }, remoteAddress: '::1', encrypted: true },
  { proxy: false, headers: {}, remoteAddress: undefined },
  { proxy: false, headers: { host: '' }, remoteAddress: '10.0.0.7' },
  { proxy: false, headers: { host: 'a.example, b.example' }, remoteAddress: '10.0.0.7' },
  { proxy: false, headers: { host: 'user@gw.example' }, remoteAddress: '10.0.0.7' },
  { proxy: false, headers: { host: ' gw.example ' }, remoteAddress: '10.0.0.7' },
  { proxy: false, headers: { ':authority': 'h2.example', host: 'gw.example' }, httpVersionMajor: 2 },
  {
    proxy: false,
    headers: { host: 'gw.example', 'x-forwarded-for': '1.2.3.4', 'x-forwarded-proto': 'https' },
    remoteAddress: '10.0.0.7',
  },
  {
    proxy: true,
    headers: {
      host: 'gw.example',
      'x-forwarded-for': '1.2.3.4, 5.6.7.8',
      'x-forwarded-proto': 'HTTPS',
      'x-forwarded-host': 'front.example',
    },
    remoteAddress: '10.0.0.7',
  },
  { proxy: true, headers: { host: 'gw.example' }, remoteAddress: '10.0.0.7' },
];

describe('upstreamRequestHeaders: X-Forwarded-*', () => {
  it.each(cases)('equals Koa’s ip, protocol and host (%o)', (c) => {
    const out = upstreamRequestHeaders(contextOf(c), [], false);
    const koa = contextOf(c);
    const prior = koa.req.headers['x-forwarded-for'];
    expect(out['x-forwarded-for']).toBe(prior ? `${prior}, ${koa.ip}` : koa.ip);
    expect(out['x-forwarded-proto']).toBe(koa.protocol);
    expect(out['x-forwarded-host']).toBe(koa.host || undefined);
  });
});
