/**
 * The admin listener: config status, hot reload and health of everything in the graph.
 * Bind it to a private address; with `admin.token` set, calls need `Authorization: Bearer`.
 * It serves one service (`ServiceRuntime`), or in cluster mode all the workers running that
 * service (`runtime/cluster.ts`, from the primary).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import Koa from 'koa';
import { checkHostAndOrigin, type HostPolicy } from './host-check.ts';

export interface AdminTarget {
  /** What is running now (GET /admin/config). */
  status(): Record<string, unknown> | Promise<Record<string, unknown>>;
  /** The reload transaction (POST /admin/reload): 200 when `ok`, else 422. */
  reload(): Promise<{ ok: boolean }>;
  /**
   * Re-reads the data of the running graph (POST /admin/reload?scope=data): each stage's and
   * resource's own `reload()` (policy files, registries...), without rebuilding anything.
   */
  reloadData?(): Promise<{ ok: boolean }>;
  /** Health of everything (GET /admin/health): 200 when `ok`, else 503. */
  health(): Promise<{ ok: boolean; checks: Record<string, unknown> }>;
}

export function createAdminApp(runtime: AdminTarget, token?: string, hosts?: HostPolicy): Koa {
  const app = new Koa();
  app.silent = true;
  const expected = token ? digest(token) : undefined;
  app.use(async (ctx) => {
    try {
      checkHostAndOrigin(ctx.req.headers, hosts);
    } catch (err) {
      ctx.status = 403;
      ctx.body = { error: 'forbidden', message: (err as Error).message, details: {} };
      return;
    }
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
      ctx.body = await runtime.status();
    } else if (route === 'POST /admin/reload' && ctx.query.scope === 'data') {
      if (!runtime.reloadData) {
        ctx.status = 501;
        ctx.body = {
          error: 'not_supported',
          message: 'A data reload is per process; reload the config instead',
          details: {},
        };
        return;
      }
      const outcome = await runtime.reloadData();
      ctx.status = outcome.ok ? 200 : 422;
      ctx.body = { status: outcome.ok ? 'reloaded' : 'failed', scope: 'data', ...outcome };
    } else if (route === 'POST /admin/reload') {
      const outcome = await runtime.reload();
      ctx.status = outcome.ok ? 200 : 422;
      ctx.body = { status: outcome.ok ? 'reloaded' : 'failed', ...outcome };
    } else if (route === 'GET /admin/health') {
      const { ok, ...report } = await runtime.health();
      ctx.status = ok ? 200 : 503;
      ctx.body = { status: ok ? 'ok' : 'degraded', ...report };
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
