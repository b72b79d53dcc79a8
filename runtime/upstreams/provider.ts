/**
 * An `openai` upstream as a provider of its own: the gateway's key for it (read from the
 * environment once, at load) and its names for the models. Applied where the upstream is created
 * (create.ts), around the transport, so every caller gets it and no caller can forget it:
 *
 * - `api_key_env`: every request carries `Authorization: Bearer <key>`; a client's Authorization
 *   header (were a route to forward it) is replaced, so a client's key never reaches a provider.
 *   The key is never logged nor reported: only the variable's name is in the config. A provider
 *   that echoes it (in a 401 body, a header) has it overwritten before anyone sees the answer
 *   (secret-scrub.ts); answers are asked for uncompressed so that they can be searched.
 * - `model_map`: `providerModel(name)` gives the provider's name of a client's model; the proxy
 *   rewrites the request's `model` with it (it holds the parsed body; the transport only bytes).
 */
import { around } from './around.ts';
import type { PlainHttpUpstreamConfig } from './config.ts';
import { SecretScrubber } from './secret-scrub.ts';
import { isHttpUpstream, type Upstream } from './types.ts';

export function asProvider<U extends Upstream>(
  upstream: U,
  config: Pick<PlainHttpUpstreamConfig, 'api_key_env' | 'model_map'>,
  environment: NodeJS.ProcessEnv,
): U {
  if (!isHttpUpstream(upstream)) return upstream;
  if (config.model_map && Object.keys(config.model_map).length > 0) {
    const models = new Map(Object.entries(config.model_map));
    upstream.providerModel = (model) => models.get(model);
  }
  const variable = config.api_key_env;
  if (variable === undefined) return upstream;
  const key = environment[variable]?.trim();
  if (!key) throw new Error(`upstream "${upstream.name}": api_key_env: environment variable ${variable} is not set`);
  const authorization = `Bearer ${key}`;
  const scrubber = new SecretScrubber(key);
  return around(upstream, {
    forward: (forward) => async (req) => {
      const headers: typeof req.headers = {};
      for (const name in req.headers) {
        const lower = name.toLowerCase();
        if (lower !== 'authorization' && lower !== 'accept-encoding') headers[name] = req.headers[name];
      }
      headers.authorization = authorization;
      headers['accept-encoding'] = 'identity';
      return scrubber.answer(await forward({ ...req, headers }), upstream.name);
    },
  });
}
