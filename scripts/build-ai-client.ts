/**
 * Bundles the AI client library (lib/ai-client/index.ts) for the browser with esbuild:
 *   dist/ai-client/ai-client.js   IIFE, global `SwitchyardAIClient` (a <script> tag, an extension page)
 *   dist/ai-client/ai-client.mjs  ES module
 * The build-time variables EXT_API_KEY and EXT_PROVIDER are read from the environment now and
 * baked in (seed 002). A key baked into a bundle is readable by anyone who has the bundle: only
 * do it for a private build.
 *
 *   npx tsx scripts/build-ai-client.ts [--outdir DIR]
 */
import { resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build, type BuildOptions as EsbuildOptions } from 'esbuild';

export const GLOBAL_NAME = 'SwitchyardAIClient';
const entry = fileURLToPath(new URL('../lib/ai-client/index.ts', import.meta.url));

export interface BuildOptions {
  outdir?: string;
  /** Build-time values; default: EXT_API_KEY and EXT_PROVIDER from the environment. */
  apiKey?: string;
  provider?: string;
  minify?: boolean;
}

export async function buildAiClient(options: BuildOptions = {}): Promise<{ iife: string; esm: string }> {
  const outdir = resolve(options.outdir ?? fileURLToPath(new URL('../dist/ai-client', import.meta.url)));
  const apiKey = options.apiKey ?? process.env.EXT_API_KEY;
  const provider = options.provider ?? process.env.EXT_PROVIDER;
  const define = {
    __EXT_API_KEY__: apiKey ? JSON.stringify(apiKey) : 'undefined',
    __EXT_PROVIDER__: provider ? JSON.stringify(provider) : 'undefined',
  };
  const common: EsbuildOptions = {
    entryPoints: [entry],
    bundle: true,
    platform: 'browser',
    target: ['chrome116', 'firefox124', 'safari17'],
    define,
    minify: options.minify ?? false,
    sourcemap: false,
    logLevel: 'warning',
  };
  const iife = resolve(outdir, 'ai-client.js');
  const esm = resolve(outdir, 'ai-client.mjs');
  await build({ ...common, format: 'iife', globalName: GLOBAL_NAME, outfile: iife });
  await build({ ...common, format: 'esm', outfile: esm });
  return { iife, esm };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const at = process.argv.indexOf('--outdir');
  const out = await buildAiClient({ outdir: at > 0 ? process.argv[at + 1] : undefined });
  console.log(`built ${out.iife} and ${out.esm}`);
}
