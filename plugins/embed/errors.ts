/** Errors of the embedding service's stages. */
import { GatewayError } from '../../runtime/index.ts';

/**
 * Runs `fn`; an error that is not a GatewayError becomes a 500 carrying its message (prefixed
 * with `what`), as the seed's 500s carry the error message.
 */
export async function passThrough<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof GatewayError) throw err;
    throw new GatewayError('internal_error', `${what}: ${(err as Error).message}`, { cause: err });
  }
}
