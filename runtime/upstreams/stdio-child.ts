/**
 * One child process of a `stdio` upstream: a JSON-RPC (or MCP) server, newline-delimited JSON on
 * stdin/stdout. Wire ids are remapped so concurrent callers never collide, and a client's
 * notifications are scoped to its own calls (notification-scope.ts). The gateway's own child is
 * restarted with exponential backoff when it dies and runs the MCP handshake itself; a client
 * session's child is neither (the client's own `initialize` goes through, and a child that ends
 * ends the session). Either way its in-flight calls fail with upstream_error when it dies.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.ts';
import type { JsonRpcRequest } from '../state.ts';
import type { ResolvedStdioConfig } from './config.ts';
import { clientInfo, MCP_PROTOCOL_VERSION } from './jsonrpc-http.ts';
import { scopeNotification } from './notification-scope.ts';
import { PendingCalls } from './pending.ts';
import { Readiness } from './readiness.ts';
import type { RpcCallOptions, ServerMessageListener, UpstreamHealth } from './types.ts';

type Message = Record<string, unknown>;

/** A child that stayed up this long is considered healthy again: backoff starts over. */
const STABLE_AFTER_MS = 30_000;
const KILL_GRACE_MS = 2000;

export interface StdioChildOptions {
  /** Restart the child when it dies (the gateway's own); otherwise `onEnded` is told once. */
  restart: boolean;
  /** Run the MCP initialize handshake itself (the gateway's own child of an MCP server). */
  handshake: boolean;
  onEnded?(reason: string): void;
  /** A client notification dropped by its scope (counted by the upstream). */
  onDropped?(method: string, reason: string): void;
}

export interface ChildCallOptions {
  signal?: RpcCallOptions['signal'];
  timeoutMs?: number;
  /** The client session the message comes from (scopes its notifications to its own calls). */
  owner?: string;
  /** The server's progress and requests that belong to this call (RpcCallOptions.onServerMessage). */
  onServerMessage?: ServerMessageListener;
}

/** A pending call that takes the server's messages: its listener and the progress token it was given. */
interface Listening {
  listener: ServerMessageListener;
  /** The caller's token, and the one on the wire (unique on this child). */
  token?: { caller: unknown; wire: string };
}

export class StdioChild {
  private readonly logger: Logger;
  private readonly pending: PendingCalls;
  private readonly state: Readiness;
  private child?: ChildProcess;
  private spawnedAt = 0;
  private restarts = 0;
  private failures = 0;
  private restartTimer?: NodeJS.Timeout;
  private closed = false;
  private exited?: Promise<void>;
  /** Calls in flight that take the server's messages, by wire id. */
  private readonly listening = new Map<number, Listening>();
  /** Who takes the notifications the server sends outside any call (RpcSessions.listen). */
  private readonly listeners = new Set<(notification: Message) => void>();
  /** Wire progress token -> wire id of its call. */
  private readonly progressTokens = new Map<string, number>();

  constructor(
    readonly name: string,
    private readonly config: ResolvedStdioConfig,
    logger: Logger,
    private readonly options: StdioChildOptions,
  ) {
    this.logger = logger; // bound to the upstream by the service graph
    this.pending = new PendingCalls(name);
    this.state = new Readiness(name, this.logger);
    this.start();
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  get inFlight(): number {
    return this.pending.size;
  }

  health(): UpstreamHealth {
    return {
      connected: this.state.connected,
      error: this.state.error,
      detail: { pid: this.child?.pid, restarts: this.restarts, in_flight: this.pending.size },
    };
  }

  ready(timeoutMs = 10000): Promise<void> {
    return this.state.wait(timeoutMs);
  }

  /** Like ready(), but fails as soon as the child ends (a command that cannot start). */
  async started(timeoutMs: number): Promise<void> {
    const exited = this.exited;
    if (!this.child || !exited) throw this.notRunning();
    const ended = exited.then(() => {
      throw this.notRunning();
    });
    ended.catch(() => {});
    await Promise.race([this.ready(timeoutMs), ended]);
  }

  async call(message: JsonRpcRequest, options: ChildCallOptions = {}): Promise<Message | undefined> {
    const timeoutMs = options.timeoutMs ?? this.config.call_timeout_ms;
    if (!this.state.connected) {
      // A child that is starting gets the call's time to finish its handshake; none at all fails
      // fast, and so does a wait for a child that dies before it is up (502, not the whole timeout).
      if (!this.child || !this.exited) throw this.notRunning();
      const waited = await Promise.race([
        this.ready(timeoutMs).then(
          () => 'ready' as const,
          () => 'timeout' as const,
        ),
        this.exited.then(() => 'exited' as const),
      ]);
      if (waited === 'exited' || (waited === 'timeout' && !this.child)) throw this.notRunning();
      if (waited === 'timeout') throw timeoutError(this.name, timeoutMs);
    }
    return this.send(
      message as unknown as Message,
      timeoutMs,
      options.signal,
      options.owner ?? null,
      options.onServerMessage,
    );
  }

  /** The server's notifications other than a call's progress, to `listener` until the function returned is called. */
  listen(listener: (notification: Message) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.restartTimer);
    this.pending.rejectAll(new GatewayError('upstream_error', 'Upstream closed', { details: { upstream: this.name } }));
    const child = this.child;
    if (!child || !this.exited) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
    killer.unref();
    await this.exited;
    clearTimeout(killer);
  }

  /** `owner`: the client session sending; null for a sessionless client; undefined for the gateway. */
  private send(
    message: Message,
    timeoutMs: number,
    signal?: RpcCallOptions['signal'],
    owner?: string | null,
    listener?: ServerMessageListener,
  ): Promise<Message | undefined> {
    if (message.id === undefined) {
      if (owner === undefined) {
        this.write(message);
        return Promise.resolve(undefined);
      }
      // A sessionless client owns no call another message of its could name.
      const scoped = scopeNotification(message, (id) =>
        owner === null ? undefined : this.pending.wireIdOf(owner, id),
      );
      if ('drop' in scoped) {
        this.logger.debug({ method: message.method, reason: scoped.drop }, 'client notification dropped');
        this.options.onDropped?.(String(message.method), scoped.drop);
      } else this.write(scoped.forward);
      return Promise.resolve(undefined);
    }
    const { wireId, response } = this.pending.add(message.id as string | number | null, {
      timeoutMs,
      signal,
      onGiveUp: (id) => this.cancel(id),
      owner: owner ?? undefined,
    });
    if (!listener) {
      this.write({ ...message, id: wireId });
      return response;
    }
    // The caller's progress token is unique among its own requests only: the wire's is this call's.
    const meta = progressMeta(message);
    const token = meta?.progressToken === undefined ? undefined : { caller: meta.progressToken, wire: `p${wireId}` };
    this.listening.set(wireId, { listener, token });
    if (token) this.progressTokens.set(token.wire, wireId);
    const done = () => {
      this.listening.delete(wireId);
      if (token) this.progressTokens.delete(token.wire);
    };
    response.then(done, done);
    const params = message.params as Message;
    this.write({
      ...message,
      id: wireId,
      ...(token ? { params: { ...params, _meta: { ...meta, progressToken: token.wire } } } : {}),
    });
    return response;
  }

  /** A progress notification of a listening call goes to it, with the caller's token back. */
  private relayProgress(msg: Message): boolean {
    const params = msg.params as Message | undefined;
    const wire = params?.progressToken;
    const wireId = typeof wire === 'string' ? this.progressTokens.get(wire) : undefined;
    const listening = wireId === undefined ? undefined : this.listening.get(wireId);
    if (!listening?.token) return false;
    listening.listener({ ...msg, params: { ...params, progressToken: listening.token.caller } });
    return true;
  }

  /**
   * A server request goes to the call it can only belong to: the one call pending on the child,
   * when it listens (stdio says nothing of which request a server request serves).
   */
  private relayRequest(msg: Message): boolean {
    if (this.pending.size !== 1 || this.listening.size !== 1) return false;
    const [listening] = this.listening.values();
    if (!listening) return false;
    let answered = false;
    listening.listener(msg, (answer) => {
      if (answered) return;
      answered = true;
      try {
        this.write({ jsonrpc: '2.0', id: msg.id, ...answer });
      } catch {
        // the child is gone: its calls fail on their own
      }
    });
    return true;
  }

  private write(message: Message): void {
    const stdin = this.child?.stdin;
    if (!stdin || stdin.destroyed || !stdin.writable) throw this.notRunning();
    stdin.write(`${JSON.stringify(message)}\n`);
  }

  /** Tells an MCP server to stop working on a call nobody waits for any more. */
  private cancel(wireId: number): void {
    if (this.config.protocol !== 'mcp') return;
    try {
      this.write({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: wireId } });
    } catch {
      // the child is gone: nothing to cancel
    }
  }

  private start(): void {
    const { command, args, environment, cwd } = this.config;
    // Never the gateway's environment itself (its secrets): see child-env.ts.
    const child = spawn(command, args, { cwd, env: environment, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child = child;
    this.spawnedAt = Date.now();
    // Until it is up, health keeps saying why the previous child ended.
    if (this.restarts === 0) this.state.down('starting');
    let resolveExit: () => void = () => {};
    this.exited = new Promise((resolve) => {
      resolveExit = resolve;
    });
    let ended = false;
    const onEnd = (reason: string) => {
      if (ended) return;
      ended = true;
      resolveExit();
      this.onExit(child, reason);
    };
    child.once('spawn', () => this.onSpawn(child));
    child.once('error', (err) => onEnd(`failed to start: ${err.message}`));
    child.once('exit', (code, signal) =>
      onEnd(signal ? `child killed by ${signal}` : `child exited with code ${code}`),
    );
    child.stdin?.on('error', (err) => this.logger.debug({ err }, 'child stdin error'));
    createInterface({ input: child.stdout! }).on('line', (line) => this.onLine(line));
    createInterface({ input: child.stderr! }).on('line', (line) => this.logger.debug({ stderr: line }, 'child stderr'));
  }

  private async onSpawn(child: ChildProcess): Promise<void> {
    this.logger.info({ pid: child.pid, command: this.config.command }, 'upstream child started');
    if (this.config.protocol !== 'mcp' || !this.options.handshake) return this.state.up();
    try {
      const answer = await this.send(
        {
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: MCP_PROTOCOL_VERSION, capabilities: {}, clientInfo },
        },
        this.config.call_timeout_ms,
      );
      if (answer?.error) throw new Error(`initialize failed: ${JSON.stringify(answer.error)}`);
      this.write({ jsonrpc: '2.0', method: 'notifications/initialized' });
      if (this.child === child) this.state.up();
    } catch (err) {
      if (this.child !== child || this.closed) return;
      this.state.down(`MCP initialize handshake failed: ${(err as Error).message}`);
      child.kill('SIGKILL'); // restarted by the exit handler
    }
  }

  private onLine(line: string): void {
    if (line.trim() === '') return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.logger.debug({ line: line.slice(0, 200) }, 'non-JSON output from child');
      return;
    }
    for (const msg of Array.isArray(parsed) ? parsed : [parsed]) {
      if (typeof msg !== 'object' || msg === null) continue;
      this.onMessage(msg as Message);
    }
  }

  private onMessage(msg: Message): void {
    if (typeof msg.method === 'string') {
      if (msg.id === undefined) {
        if (msg.method === 'notifications/progress' && this.relayProgress(msg)) return;
        if (msg.method !== 'notifications/progress' && this.listeners.size > 0) {
          for (const listener of this.listeners) listener(msg);
          return;
        }
        this.logger.debug({ method: msg.method }, 'notification from child ignored');
        return;
      }
      if (this.relayRequest(msg)) return;
      // A request from the server (roots/list, sampling...) no caller takes: no client features here.
      this.write({ jsonrpc: '2.0', id: msg.id, error: { code: -32601, message: 'Method not found' } });
      return;
    }
    if (!this.pending.settle(msg)) this.logger.debug({ id: msg.id }, 'response for no pending call');
  }

  private onExit(child: ChildProcess, reason: string): void {
    if (this.child !== child) return;
    this.child = undefined;
    this.state.down(reason);
    this.pending.rejectAll(
      new GatewayError('upstream_error', `Upstream process ended: ${reason}`, { details: { upstream: this.name } }),
    );
    if (!this.options.restart) {
      if (!this.closed) this.logger.info({ reason }, 'session child ended');
      this.options.onEnded?.(reason);
      return;
    }
    if (this.closed) return;
    if (Date.now() - this.spawnedAt > STABLE_AFTER_MS) this.failures = 0;
    const { initial_delay_ms, max_delay_ms } = this.config.restart;
    const delay = Math.min(initial_delay_ms * 2 ** this.failures, max_delay_ms);
    this.failures++;
    this.logger.warn({ reason, restart_in_ms: delay }, 'upstream child ended');
    this.restartTimer = setTimeout(() => {
      this.restarts++;
      this.start();
    }, delay);
    this.restartTimer.unref();
  }

  private notRunning(): GatewayError {
    return new GatewayError('upstream_error', `Upstream is not running: ${this.state.error ?? 'unknown'}`, {
      details: { upstream: this.name },
    });
  }
}

function progressMeta(message: Message): Message | undefined {
  const params = message.params;
  if (params === null || typeof params !== 'object' || Array.isArray(params)) return undefined;
  const meta = (params as Message)._meta;
  return meta !== null && typeof meta === 'object' && !Array.isArray(meta) ? (meta as Message) : undefined;
}

function timeoutError(upstream: string, timeoutMs: number): GatewayError {
  return new GatewayError('upstream_timeout', `Upstream did not answer within ${timeoutMs} ms`, {
    details: { upstream, timeout_ms: timeoutMs },
  });
}
