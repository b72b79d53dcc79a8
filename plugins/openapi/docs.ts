/**
 * openapi-docs: interactive API documentation (Swagger UI, from the installed swagger-ui-dist,
 * no CDN) for the OpenAPI description served at `openapi_url`. Route it with a wildcard so the
 * page's assets resolve: `match: { path: "/docs{/*file}" }`. `/docs` answers the page, and
 * `/docs/<asset>` one of Swagger UI's files (read once, at start); anything else is 404.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { definePlugin, type FromSchema, GatewayError, type JsonSchema, respond } from '../../runtime/index.ts';
import { describeStage } from './api.ts';

const assets: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'index.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'oauth2-redirect.html': 'text/html; charset=utf-8',
  'oauth2-redirect.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    base_path: {
      type: 'string',
      pattern: '^/[A-Za-z0-9/_.-]*$',
      default: '/docs',
      description: 'Where the page is routed.',
    },
    openapi_url: { type: 'string', minLength: 1, default: '/openapi.json' },
    title: { type: 'string', default: 'API documentation' },
  },
} as const satisfies JsonSchema;
type DocsOptions = FromSchema<typeof optionsSchema>;

export default definePlugin<DocsOptions>({
  name: 'openapi-docs',
  description: 'Serve Swagger UI (interactive documentation) for the OpenAPI description at openapi_url.',
  options: optionsSchema,
  create(options) {
    const base = options.base_path.replace(/\/$/, '');
    const dist = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    const files = new Map(
      Object.entries(assets).map(([name, type]) => [name, { type, body: readFileSync(join(dist, name)) }]),
    );
    const initializer = `window.onload = function () {
  window.ui = SwaggerUIBundle({
    url: ${JSON.stringify(options.openapi_url)},
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: 'StandaloneLayout',
    oauth2RedirectUrl: window.location.origin + ${JSON.stringify(`${base}/oauth2-redirect.html`)},
  });
};
`;
    files.set('swagger-initializer.js', { type: 'text/javascript; charset=utf-8', body: Buffer.from(initializer) });
    const page = `<!DOCTYPE html>
<html lang="en">
  <head>
    <meta charset="UTF-8">
    <title>${escapeHtml(options.title)}</title>
    <link rel="stylesheet" type="text/css" href="${base}/swagger-ui.css" />
    <link rel="stylesheet" type="text/css" href="${base}/index.css" />
    <link rel="icon" type="image/png" href="${base}/favicon-32x32.png" sizes="32x32" />
    <link rel="icon" type="image/png" href="${base}/favicon-16x16.png" sizes="16x16" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="${base}/swagger-ui-bundle.js" charset="UTF-8"></script>
    <script src="${base}/swagger-ui-standalone-preset.js" charset="UTF-8"></script>
    <script src="${base}/swagger-initializer.js" charset="UTF-8"></script>
  </body>
</html>
`;

    return async (ctx) => {
      const raw = Object.values(ctx.params ?? {})[0] as string | string[] | undefined;
      const name = Array.isArray(raw) ? raw.join('/') : (raw ?? '');
      if (name === '' || name === 'index.html') {
        respond(ctx, page, { type: 'text/html; charset=utf-8' });
        return;
      }
      const file = files.get(name);
      if (!file) throw new GatewayError('not_found', 'Not Found');
      ctx.set('Cache-Control', 'public, max-age=86400');
      respond(ctx, file.body, { type: file.type });
    };
  },
});

describeStage('openapi-docs', () => ({ hide: true }));
