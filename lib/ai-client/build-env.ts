/**
 * Build-time variables `EXT_API_KEY` and `EXT_PROVIDER` (seed 002). The browser bundle gets them
 * through esbuild's `define` (scripts/build-ai-client.ts replaces the two identifiers below with
 * string literals); under Node they are read from the environment at run time.
 */
declare const __EXT_API_KEY__: string | undefined;
declare const __EXT_PROVIDER__: string | undefined;

export interface BuildTimeValues {
  apiKey?: string;
  provider?: string;
}

export function buildTimeValues(): BuildTimeValues {
  // `typeof` on an undeclared identifier is safe: it is 'undefined' unless the bundler defined it.
  const apiKey = typeof __EXT_API_KEY__ === 'string' ? __EXT_API_KEY__ : processEnv('EXT_API_KEY');
  const provider = typeof __EXT_PROVIDER__ === 'string' ? __EXT_PROVIDER__ : processEnv('EXT_PROVIDER');
  return { apiKey: apiKey || undefined, provider: provider || undefined };
}

function processEnv(name: string): string | undefined {
  const proc = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return proc?.env?.[name];
}
