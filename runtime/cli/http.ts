/**
 * One HTTP call of a CLI command to a running service, with the failure said in one line and the
 * exit status the commands share: 1 no answer or a server failure (connection refused, timeout,
 * 5xx); 2 refused (401/403 token, 404 no such endpoint). The token goes in `Authorization:
 * Bearer`, the one admin scheme every admin endpoint accepts (docs/operations.md).
 */
import { readFileSync } from 'node:fs';
import { Agent, type Dispatcher, fetch } from 'undici';

export const CLI_TIMEOUT_MS = 10_000;

export type Outcome =
  | { ok: true; status: number; body: unknown }
  /** An answer, but not a 2xx: `body` when it was JSON (e.g. a 503 health report). */
  | { ok: false; failure: string; exit: 1 | 2; status?: number; body?: unknown };

export interface CallOptions {
  method?: 'GET' | 'POST';
  token?: string;
  /** A CA certificate file (PEM) to trust for an https URL. */
  ca?: string;
  /** What a 404 probably means, for the hint. */
  notFoundHint?: string;
}

export async function callService(url: URL, options: CallOptions = {}): Promise<Outcome> {
  let dispatcher: Dispatcher | undefined;
  if (options.ca) {
    try {
      dispatcher = new Agent({ connect: { ca: readFileSync(options.ca) } });
    } catch (err) {
      return {
        ok: false,
        failure: `cannot read --ca ${options.ca}: ${(err as NodeJS.ErrnoException).code ?? err}`,
        exit: 2,
      };
    }
  }
  try {
    return await exchange(url, options, dispatcher);
  } finally {
    await dispatcher?.close();
  }
}

async function exchange(url: URL, options: CallOptions, dispatcher: Dispatcher | undefined): Promise<Outcome> {
  let res: Awaited<ReturnType<typeof fetch>>;
  try {
    res = await fetch(url, {
      method: options.method ?? 'GET',
      headers: { accept: 'application/json', ...(options.token ? { authorization: `Bearer ${options.token}` } : {}) },
      signal: AbortSignal.timeout(CLI_TIMEOUT_MS),
      dispatcher,
    });
  } catch (err) {
    return { ok: false, failure: `cannot reach ${url.origin}: ${networkReason(err)}`, exit: 1 };
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (res.ok) {
    if (body === undefined) return { ok: false, failure: `${url.pathname}: the answer is not JSON`, exit: 1 };
    return { ok: true, status: res.status, body };
  }
  const message = errorMessage(body) ?? (text.trim().split('\n')[0] || res.statusText);
  const hint =
    res.status === 401 || res.status === 403
      ? ' (give the admin token with --token or SWITCHYARD_ADMIN_TOKEN)'
      : res.status === 404
        ? ` (${options.notFoundHint ?? `no endpoint ${url.pathname} at ${url.origin}?`})`
        : '';
  return {
    ok: false,
    failure: `${res.status} ${message}${hint}`,
    exit: res.status >= 500 ? 1 : 2,
    status: res.status,
    body,
  };
}

/** `message` of the error body the service's dialect writes (simple, plain or openai). */
function errorMessage(body: unknown): string | undefined {
  if (!body || typeof body !== 'object') return undefined;
  const b = body as { message?: unknown; error?: unknown };
  if (typeof b.message === 'string') return b.message;
  if (typeof b.error === 'string') return b.error;
  const nested = b.error as { message?: unknown } | undefined;
  return typeof nested?.message === 'string' ? nested.message : undefined;
}

/** `connection refused`, `timed out after 10 s`… from a failed fetch. */
function networkReason(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e.name === 'TimeoutError') return `no answer after ${CLI_TIMEOUT_MS / 1000} s`;
  const code = e.cause?.code;
  if (code === 'ECONNREFUSED') return 'connection refused (is the service running? check --url)';
  if (code === 'ENOTFOUND') return 'unknown host';
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET') return 'connection closed by the server';
  return e.cause?.message ?? e.message;
}
