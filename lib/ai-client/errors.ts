/**
 * Typed errors of a chat request. Every one is an `AIClientError` with a `kind`, so a caller can
 * switch on it (the chunk plugin maps them to gateway errors). Messages never contain the API key.
 */
export type AIErrorKind = 'config' | 'http' | 'timeout' | 'aborted' | 'network' | 'bad_response';

export class AIClientError extends Error {
  readonly kind: AIErrorKind;
  constructor(kind: AIErrorKind, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'AIClientError';
    this.kind = kind;
  }
}

/** The config cannot make a request (no model, baseUrl not a URL). */
export class AIConfigError extends AIClientError {
  constructor(message: string) {
    super('config', message);
    this.name = 'AIConfigError';
  }
}

/** The provider answered with a non-2xx status. */
export class AIHttpError extends AIClientError {
  readonly status: number;
  /** The provider's error `type` and `code` (OpenAI's error body), when it sent them. */
  readonly type?: string;
  readonly code?: string;
  /** Seconds from `Retry-After`, when present (429, 503). */
  readonly retryAfterSeconds?: number;

  constructor(status: number, message: string, details: { type?: string; code?: string; retryAfterSeconds?: number }) {
    super('http', message);
    this.name = 'AIHttpError';
    this.status = status;
    this.type = details.type;
    this.code = details.code;
    this.retryAfterSeconds = details.retryAfterSeconds;
  }
}

/** No complete answer within `timeoutMs`. */
export class AITimeoutError extends AIClientError {
  readonly timeoutMs: number;
  constructor(timeoutMs: number) {
    super('timeout', `No answer from the provider within ${timeoutMs} ms`);
    this.name = 'AITimeoutError';
    this.timeoutMs = timeoutMs;
  }
}

/** The caller's AbortSignal fired. */
export class AIAbortError extends AIClientError {
  constructor(cause?: unknown) {
    super('aborted', 'The request was aborted', { cause });
    this.name = 'AIAbortError';
  }
}

/** The provider could not be reached (DNS, refused connection, CORS in a browser...). */
export class AINetworkError extends AIClientError {
  constructor(message: string, cause?: unknown) {
    super('network', message, { cause });
    this.name = 'AINetworkError';
  }
}

/** A 2xx answer that is not a chat completion (not JSON, no choices, no text). */
export class AIResponseError extends AIClientError {
  constructor(message: string) {
    super('bad_response', message);
    this.name = 'AIResponseError';
  }
}
