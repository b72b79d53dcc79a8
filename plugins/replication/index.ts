/**
 * replication: primary/replica replication of an `entity-store` resource over its ordered change
 * log (see docs/datastore.md, "Replication").
 *
 *   resources:
 *     store: { type: entity-store, path: ../.data/datastore.db }
 *     replication:
 *       type: replication
 *       store: store
 *       role: "${DB_REPLICATION_ROLE:-standalone}"     # standalone | primary | replica
 *       bind: "${DB_REPLICATION_BIND:-127.0.0.1:5433}"  # primary: where replicas connect
 *       primary: "${DB_REPLICATION_PRIMARY:-}"          # replica: the primary's host:port
 *
 * A primary serves its change feed on `bind`. A replica makes its store read-only (writes get 403
 * `read_only` naming the primary), follows the feed, applies every change in order exactly once,
 * and reports its lag as metrics and in its health.
 */
import {
  defineResource,
  type EntityStore,
  type FromSchema,
  type HealthReport,
  isLoopbackHost,
  type JsonSchema,
} from '../../runtime/index.ts';
import { serveFeed } from './feed-server.ts';
import { Follower } from './follower.ts';

/** The replica follower of the most recent graph, for the gauges (get-or-create across reloads). */
let active: { role: 'replica'; follower: Follower } | undefined;

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['store'],
  properties: {
    store: { type: 'string', 'x-ref': 'resource', description: 'The entity-store resource to replicate.' },
    role: { enum: ['standalone', 'primary', 'replica'], default: 'standalone' },
    bind: {
      type: 'string',
      default: '127.0.0.1:5433',
      pattern: '^(\\[[0-9a-fA-F:.]+\\]|[^:\\s]+):\\d{1,5}$',
      description: 'Primary: host:port of the change feed replicas connect to.',
    },
    primary: {
      type: 'string',
      default: '',
      description: "Replica: the primary's feed, host:port or http(s)://host:port.",
    },
    token: {
      type: 'string',
      default: '',
      description: 'Shared secret: the primary requires it, replicas send it (Bearer). Empty: none.',
    },
    require_token: {
      type: 'boolean',
      default: false,
      description:
        'Primary: refuse to start without `token` even on a loopback bind; set it when the API requires authentication (the feed serves every change). Beyond loopback a token is always required.',
    },
    batch: { type: 'integer', minimum: 1, maximum: 5000, default: 1000, description: 'Changes per fetch.' },
    wait_ms: { type: 'integer', minimum: 0, maximum: 30000, default: 10000, description: 'Long-poll wait.' },
    poll_ms: {
      type: 'integer',
      minimum: 5,
      maximum: 5000,
      default: 25,
      description: 'Primary: news check interval.',
    },
  },
} as const satisfies JsonSchema;
type ReplicationOptions = FromSchema<typeof optionsSchema>;

export default defineResource<ReplicationOptions>({
  type: 'replication',
  description: 'Primary/replica replication of an entity-store resource over its ordered change log.',
  options: optionsSchema,
  async create(options, env) {
    const store = env.resource<{ store: EntityStore }>(options.store).store;
    const token = options.token || undefined;
    const role = options.role;
    // Read at scrape time from the follower of the graph now running (a reload replaces it).
    const currentFollower = () => (active?.role === role ? active.follower : undefined);
    env.metrics.gauge({
      name: 'db_replication_lag_seconds',
      help: 'Replica: age of the newest applied change while behind the primary (0 when caught up)',
      collect() {
        const f = currentFollower();
        if (f) this.set(f.state.lagSeconds);
      },
    });
    env.metrics.gauge({
      name: 'db_replication_lag_changes',
      help: 'Replica: changes the primary has that this replica has not applied yet',
      collect() {
        const f = currentFollower();
        if (f) this.set(Math.max(0, f.state.primaryLastSeq - f.state.lastApplied));
      },
    });
    const appliedSeq = env.metrics.gauge({
      name: 'db_replication_last_applied_seq',
      help: 'Replica: seq of the last change applied; primary: last change written',
      collect() {
        const f = currentFollower();
        if (f) this.set(f.state.lastApplied);
      },
    });
    env.metrics.gauge({
      name: 'db_replication_connected',
      help: 'Replica: 1 while the last fetch from the primary succeeded',
      collect() {
        const f = currentFollower();
        if (f) this.set(f.state.connected ? 1 : 0);
      },
    });

    if (role === 'primary') {
      const [host, port] = splitHostPort(options.bind);
      // The feed serves every change (every field of every entity): it is never more open than
      // the API, and never open beyond loopback.
      if (!token && (options.require_token || !isLoopbackHost(host))) {
        const why = options.require_token
          ? 'the API requires authentication'
          : `bind ${options.bind} is beyond loopback`;
        throw new Error(
          `replication: the change feed needs a token (\`token\`, DB_REPLICATION_TOKEN in the datastore) because ${why}; replicas send the same one`,
        );
      }
      const release = await serveFeed({ host, port }, { store, token, pollMs: options.poll_ms });
      env.logger.info({ bind: options.bind }, 'replication: primary, serving the change feed');
      return {
        value: { role },
        health: async (): Promise<HealthReport> => {
          const last = await store.lastSeq();
          appliedSeq.set(last);
          return { ok: true, status: 'primary', detail: { bind: options.bind, last_seq: last } };
        },
        describe: () => ({ role, bind: options.bind }),
        close: release,
      };
    }

    if (role === 'replica') {
      if (!options.primary) throw new Error('role replica needs `primary` (DB_REPLICATION_PRIMARY=<host>:<port>)');
      const primary = /^https?:\/\//.test(options.primary)
        ? options.primary.replace(/\/$/, '')
        : `http://${options.primary}`;
      store.setReadOnly(`this server is a read-only replica of ${options.primary}; send writes to the primary`);
      let lastLogged = '';
      const follower = new Follower({
        store,
        primary,
        token,
        batch: options.batch,
        waitMs: options.wait_ms,
        onError: (err) => {
          // One line per distinct failure, not one per retry.
          if (err.message !== lastLogged)
            env.logger.warn({ primary: options.primary, err: err.message }, 'replication: fetch failed');
          lastLogged = err.message;
        },
      });
      follower.start();
      active = { role, follower };
      const sample = () => follower.state;
      env.logger.info({ primary: options.primary }, 'replication: replica, following the primary');
      return {
        value: { role, state: () => sample() },
        health: (): HealthReport => {
          const s = sample();
          return {
            ok: s.connected,
            status: s.connected ? 'replica' : 'primary-unreachable',
            ...(s.lastError ? { error: s.lastError } : {}),
            detail: {
              primary: options.primary,
              last_applied_seq: s.lastApplied,
              lag_changes: Math.max(0, s.primaryLastSeq - s.lastApplied),
              lag_seconds: s.lagSeconds,
            },
          };
        },
        describe: () => ({ role, primary: options.primary }),
        async close() {
          if (active?.follower === follower) active = undefined;
          await follower.stop();
        },
      };
    }

    return { value: { role }, describe: () => ({ role }) };
  },
});

function splitHostPort(bind: string): [string, number] {
  const i = bind.lastIndexOf(':');
  const host = bind.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  return [host, Number(bind.slice(i + 1))];
}
