/**
 * The least a Koa + undici proxy does, as an app: it reads the request body, forwards it with an
 * undici keep-alive Pool (same pool size as a Switchyard `jsonrpc` upstream) and streams the answer
 * back, or with `buffer` reads the answer whole and sends it as a Buffer (the cheaper way for small
 * answers, and the floor `npm run bench` compares with). No parsing, no validation, no logging.
 * Run as a process by bare-proxy.ts; counted in process by test/services/hot-path-work.test.ts.
 */
import Koa from 'koa';
import { Pool } from 'undici';

async function readBody(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function koaFloor(upstreamUrl: string, buffer: boolean): { app: Koa; pool: Pool } {
  const upstream = new URL(upstreamUrl);
  const pool = new Pool(upstream.origin, { connections: 64, keepAliveTimeout: 60_000 });
  const app = new Koa();
  app.use(async (ctx) => {
    const body = ctx.method === 'GET' || ctx.method === 'HEAD' ? null : await readBody(ctx.req);
    const headers: Record<string, string> = {};
    const type = ctx.get('content-type');
    if (type) headers['content-type'] = type;
    const accept = ctx.get('accept');
    if (accept) headers.accept = accept;
    const res = await pool.request({
      method: ctx.method as 'POST',
      path: upstream.pathname + ctx.search,
      headers,
      body,
    });
    ctx.status = res.statusCode;
    const resType = res.headers['content-type'];
    if (typeof resType === 'string') ctx.type = resType;
    if (buffer) {
      ctx.body = await readBody(res.body);
      return;
    }
    const length = res.headers['content-length'];
    ctx.body = res.body;
    if (typeof length === 'string') ctx.length = Number(length);
  });
  return { app, pool };
}
