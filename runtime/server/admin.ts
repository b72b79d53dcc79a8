/**
 * The admin listener: config status, hot reload and health of everything in the graph.
 * Bind it to a private address; with `admin.token` set, calls need `Authorization: Bearer`.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Koa from 'koa';
import { graphHealth } from '../service/graph.ts';
import type { ServiceRuntime } from '../service/runtime.ts';

export function createAdminApp(runtime: ServiceRuntime, token?: string): Koa {
  const app = new Koa();
  app.silent = true;
  const expected = token ? digest(token) : undefined;
  app.use(async (ctx) => {
    if (expected) {
      const given = /^Bearer (.+)$/i.exec(ctx.get('authorization'))?.[1] ?? '';
      if (!timingSafeEqual(digest(given), expected)) {
        ctx.status = 401;
        ctx.set('WWW-Authenticate', 'Bearer');
        ctx.body = { error: 'unauthorized', message: 'Admin token missing or wrong', details: {} };
        return;
      }
    }
    const route = `${ctx.method} ${ctx.path}`;
    if (route === 'GET /admin/config') {
      ctx.body = runtime.status();
    } else if (route === 'POST /admin/reload') {
      const outcome = await runtime.reload();
      ctx.status = outcome.ok ? 200 : 422;
      ctx.body = { status: outcome.ok ? 'reloaded' : 'failed', ...outcome };
    } else if (route === 'GET /admin/health') {
      const checks = await graphHealth(runtime.graph);
      const ok = Object.values(checks).every((c) => c.ok);
      ctx.status = ok ? 200 : 503;
      ctx.body = { status: ok ? 'ok' : 'degraded', checks };
    } else {
      ctx.status = 404;
      ctx.body = { error: 'not_found', message: `No admin route ${route}`, details: {} };
    }
  });
  return app;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
