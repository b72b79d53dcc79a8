/**
 * The compose file and the Kubernetes manifests (deploy/) against the service they run: the
 * typed proxy started from its shipped config through the image's entrypoint, with the
 * manifests' environment and the local PostgreSQL and Redis standing in for theirs. Probes hit
 * paths the config serves, the Host names the manifests use pass the Host check, two replicas
 * share one rate-limit budget and one audit chain, and the dashboard and alerts use only
 * metrics the service exports. Needs Redis and PostgreSQL (skipped without them, failing under
 * CI=true).
 */

import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { renderConfigMap } from '../../scripts/deploy-configmap.ts';
import {
  deployDir,
  exportedNames,
  metricNames,
  type Replica,
  readDeploy,
  root,
  startEntrypoint,
  yamlDoc,
  yamlDocs,
} from '../helpers/deploy.ts';
import { PG_URL, tcpReachable } from '../helpers/reachable.ts';
import { REDIS_URL } from '../helpers/redis.ts';

type Env = Record<string, string>;
interface ComposeService {
  image?: string;
  build?: unknown;
  environment?: Env;
  healthcheck?: { test: string[] };
  user?: string;
  read_only?: boolean;
  ports?: string[];
  depends_on?: Record<string, unknown>;
}
const compose = yamlDoc<{ services: Record<string, ComposeService> }>('compose.yaml');
const gatewayNames = Object.keys(compose.services).filter((n) => compose.services[n]?.build !== undefined);

/** Compose's interpolation of `${VAR:-default}` and `${VAR:?message}` (with `given` as the .env file). */
function interpolate(value: string, given: Env): string {
  return value.replace(/\$\{(\w+)(?::([-?])([^}]*))?\}/g, (_, name: string, op?: string, rest?: string) => {
    if (given[name]) return given[name];
    if (op === '?') throw new Error(`${name}: ${rest}`);
    return op === '-' ? (rest ?? '') : '';
  });
}

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
}
interface Container {
  name: string;
  image: string;
  env: EnvVar[];
  ports: { name: string; containerPort: number }[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  securityContext: { allowPrivilegeEscalation: boolean; readOnlyRootFilesystem: boolean };
  volumeMounts: { name: string; mountPath: string; subPath?: string }[];
}
const k8s = readdirSync(join(deployDir, 'kubernetes'))
  .filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')
  .flatMap((f) => yamlDocs(`kubernetes/${f}`).map((doc) => ({ file: f, doc })));
interface K8sObject {
  kind: string;
  metadata: { name: string };
  data: Env;
  spec: {
    replicas: number;
    minAvailable: number;
    selector: Env & { matchLabels?: Env };
    ports: { targetPort: string }[];
    template: {
      metadata: { labels: Env };
      spec: {
        securityContext: { runAsNonRoot: boolean; runAsUser: number };
        containers: Container[];
        volumes: { name: string; configMap?: { name: string } }[];
      };
    };
  };
}
function manifest(kind: string): K8sObject {
  const found = k8s.filter((m) => m.doc.kind === kind);
  expect(found, kind).toHaveLength(1);
  return found[0]!.doc as unknown as K8sObject;
}
const deployment = manifest('Deployment');
const container = deployment.spec.template.spec.containers[0]!;

/** The Deployment's environment as the kubelet gives it, with `secrets` for the Secret's keys. */
function deploymentEnv(secrets: Env, namespace: string): Env {
  const env: Env = {};
  for (const v of container.env) {
    if (v.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[v.name] = namespace;
    else if (v.valueFrom?.secretKeyRef) {
      const s = secrets[v.valueFrom.secretKeyRef.key];
      if (s !== undefined) env[v.name] = s;
    } else env[v.name] = (v.value ?? '').replace(/\$\((\w+)\)/g, (_, n: string) => env[n] ?? '');
  }
  return env;
}

const credentialName = /PASSWORD|TOKEN|SECRET|_KEY$|DATABASE_URL/;

describe('compose.yaml', () => {
  it('runs two gateway replicas behind one published port, sharing Redis and PostgreSQL', () => {
    expect(gatewayNames).toEqual(['gateway-1', 'gateway-2']);
    const [a, b] = gatewayNames.map((n) => compose.services[n]!);
    expect(a!.environment).toEqual(b!.environment);
    const env = a!.environment!;
    expect(env.PROXY_RATE_BACKEND).toBe('redis');
    expect(new URL(env.REDIS_URL!).hostname).toBe('redis');
    expect(new URL(interpolate(env.AUDIT_DATABASE_URL!, { POSTGRES_PASSWORD: 'x' })).hostname).toBe('postgres');
    for (const name of ['redis', 'postgres']) expect(compose.services[name], name).toBeDefined();
    // Only the balancer publishes a port; it forwards to both replicas.
    const published = Object.entries(compose.services).filter(([, s]) => s.ports?.length);
    expect(published.map(([n]) => n)).toEqual(['gateway']);
    const nginx = readDeploy('compose/nginx.conf');
    for (const n of gatewayNames) expect(nginx).toMatch(new RegExp(`server ${n}:9443`));
  });

  it('gives every service a healthcheck and runs the gateways as a non-root user on a read-only root', () => {
    for (const [name, service] of Object.entries(compose.services)) {
      expect(service.healthcheck?.test.length, name).toBeGreaterThan(0);
    }
    for (const name of gatewayNames) {
      const service = compose.services[name]!;
      expect(Number(service.user?.split(':')[0]), name).toBeGreaterThan(0);
      expect(service.read_only, name).toBe(true);
      expect(service.healthcheck!.test).toEqual(['CMD', 'node', 'deploy/docker/healthcheck.js']);
    }
  });

  it('refuses to start without the secrets and writes none in clear', () => {
    for (const service of Object.values(compose.services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (!credentialName.test(key)) continue;
        // Every credential comes from the environment (.env): no literal, no non-empty default.
        const literal = value.replace(/\$\{\w+(?::\?[^}]*|:-)?\}/g, '');
        expect(literal.match(/:\/\/[^:/@]+:([^@]+)@/)?.[1], key).toBeUndefined();
        if (!key.endsWith('DATABASE_URL')) expect(literal, key).toBe('');
      }
    }
    expect(() => interpolate(compose.services['gateway-1']!.environment!.AUDIT_DATABASE_URL!, {})).toThrow(
      /POSTGRES_PASSWORD/,
    );
  });
});

describe('Kubernetes manifests', () => {
  it('ship configs/typed-proxy.yaml byte for byte in the ConfigMap, generated by the current script', () => {
    const configMap = manifest('ConfigMap');
    expect(configMap.data['typed-proxy.yaml']).toBe(readFileSync(join(root, 'configs/typed-proxy.yaml'), 'utf8'));
    expect(readDeploy('kubernetes/configmap.yaml'), 'run npx tsx scripts/deploy-configmap.ts').toBe(renderConfigMap());
    const mount = container.volumeMounts.find((m) => m.name === 'config')!;
    const volume = deployment.spec.template.spec.volumes.find((v) => v.name === 'config');
    expect(volume?.configMap?.name).toBe(configMap.metadata.name);
    expect(mount).toMatchObject({ mountPath: '/app/configs/typed-proxy.yaml', subPath: 'typed-proxy.yaml' });
  });

  it('run non-root, without privilege escalation, on a read-only root', () => {
    const pod = deployment.spec.template.spec.securityContext;
    expect(pod.runAsNonRoot).toBe(true);
    expect(pod.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({ allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
    // The image's uid is the one the pod asks for.
    expect(readDeploy('docker/Dockerfile')).toMatch(new RegExp(`^USER ${pod.runAsUser}:`, 'm'));
  });

  it('take credentials only from a Secret', () => {
    for (const v of container.env) {
      if (credentialName.test(v.name)) expect(v.valueFrom?.secretKeyRef, v.name).toBeDefined();
    }
    expect(k8s.some((m) => m.doc.kind === 'Secret')).toBe(false);
  });

  it('select the Deployment from the Service and the PodDisruptionBudget; kustomization lists every file', () => {
    const labels = deployment.spec.template.metadata.labels;
    for (const kind of ['Service', 'PodDisruptionBudget']) {
      const m = manifest(kind);
      const selector = m.spec.selector.matchLabels ?? m.spec.selector;
      expect(
        Object.entries(selector).every(([k, v]) => labels[k] === v),
        kind,
      ).toBe(true);
    }
    expect(manifest('PodDisruptionBudget').spec.minAvailable).toBeLessThan(deployment.spec.replicas);
    const service = manifest('Service');
    for (const p of service.spec.ports) expect(container.ports.map((c) => c.name)).toContain(p.targetPort);
    const files = new Set(k8s.map((m) => m.file));
    expect(new Set(yamlDoc<{ resources: string[] }>('kubernetes/kustomization.yaml').resources)).toEqual(files);
  });
});

const prerequisites = (await tcpReachable(6379)) && (await tcpReachable(5432));
if (!prerequisites && process.env.CI !== 'true') {
  console.warn('deploy manifests against the running service skipped: Redis 6379 and PostgreSQL 5432 needed');
}

describe.skipIf(!prerequisites && process.env.CI !== 'true')('the manifests against the service they run', () => {
  const secrets = { REDIS_URL, AUDIT_DATABASE_URL: PG_URL };
  let replicas: Replica[] = [];
  let pod: Replica;
  const composeEnv = (): Env => {
    const raw = compose.services['gateway-1']!.environment!;
    const env = Object.fromEntries(
      Object.entries(raw).map(([k, v]) => [k, interpolate(String(v), { POSTGRES_PASSWORD: 'unused' })]),
    );
    // The compose network's Redis and PostgreSQL are the local ones here; a short budget to exhaust.
    return { ...env, ...secrets, PROXY_RATE_LIMIT_MAX: '3' };
  };

  beforeAll(async () => {
    if (!prerequisites) expect.fail('Redis and PostgreSQL must be reachable under CI=true');
    [replicas, pod] = await Promise.all([
      Promise.all([startEntrypoint(composeEnv()), startEntrypoint(composeEnv())]),
      startEntrypoint(deploymentEnv(secrets, 'switchyard')),
    ]);
  }, 150_000);
  afterAll(async () => {
    await Promise.all([...replicas, pod].filter(Boolean).map((r) => r.stop()));
  });

  it('answers 200 on every probe path of the Deployment and on the image healthcheck', async () => {
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      const path = probe?.httpGet?.path;
      expect(path).toMatch(/^\//);
      // The kubelet sends Host <pod IP>:<port>: an address, which passes the Host check.
      const res = await fetch(`${pod.url}${path}`);
      expect(res.status, path).toBe(200);
    }
    for (const replica of [...replicas, pod]) {
      const check = spawnSync(process.execPath, ['deploy/docker/healthcheck.js'], {
        cwd: root,
        env: { ...process.env, SWITCHYARD_HEALTH_URL: `${replica.url}/health` },
        encoding: 'utf8',
      });
      expect(check.status, check.stdout).toBe(0);
    }
    const down = spawnSync(process.execPath, ['deploy/docker/healthcheck.js'], {
      cwd: root,
      env: { ...process.env, SWITCHYARD_HEALTH_URL: 'http://127.0.0.1:1/health' },
      encoding: 'utf8',
    });
    expect(down.status).toBe(1);
  });

  it('accepts the names clients use in compose and Kubernetes, and refuses others', async () => {
    const get = (url: string, host: string) =>
      new Promise<number>((resolve, reject) => {
        // fetch cannot set Host: a raw request can.
        import('node:http').then(({ request }) => {
          const req = request(`${url}/health`, { headers: { host } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          });
          req.on('error', reject);
          req.end();
        }, reject);
      });
    expect(await get(replicas[0]!.url, 'gateway:9443')).toBe(200);
    expect(await get(replicas[0]!.url, 'typed-proxy')).toBe(200);
    expect(await get(pod.url, 'typed-proxy.switchyard.svc.cluster.local:9443')).toBe(200);
    expect(await get(pod.url, 'typed-proxy:9443')).toBe(200);
    expect(await get(pod.url, 'evil.example.com')).toBe(403);
  });

  it('counts one rate-limit budget across both compose replicas (Redis, keyed by X-Forwarded-For)', async () => {
    const client = `198.51.100.${randomInt(1, 255)}, 10.${randomInt(0, 255)}.${randomInt(0, 255)}.${randomInt(1, 255)}`;
    const call = (r: Replica) =>
      fetch(`${r.url}/capabilities`, { headers: { 'x-forwarded-for': client } }).then((res) => res.status);
    const [a, b] = replicas as [Replica, Replica];
    // The budget is 3 per window, whichever replica answers.
    expect([await call(a), await call(b), await call(a)]).toEqual([200, 200, 200]);
    expect(await call(b)).toBe(429);
    const text = await (await fetch(b.metricsUrl)).text();
    expect(text).toMatch(/switchyard_rate_limit_decisions_total\{decision="limited",store="redis"/);
  });

  it('appends both replicas\u2019 records to one audit chain in PostgreSQL', async () => {
    const refuse = async (r: Replica) => {
      const res = await fetch(r.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': `203.0.113.${randomInt(1, 255)}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {} } }),
      });
      expect(res.status).not.toBe(200);
      return res.headers.get('x-request-id')!;
    };
    const ids = [await refuse(replicas[0]!), await refuse(replicas[1]!)];
    const db = new pg.Client({ connectionString: PG_URL });
    await db.connect();
    try {
      const rows = (
        await db.query<{ request_id: string; seq: string; prev_hash: string }>(
          'SELECT request_id, seq, prev_hash FROM audit_records WHERE request_id = ANY($1) ORDER BY seq',
          [ids],
        )
      ).rows;
      expect(rows.map((r) => r.request_id).sort()).toEqual([...ids].sort());
      // One chain: each record links to the hash of the record before it, whichever replica wrote it.
      // The first record of the table (a fresh database) links to the genesis hash instead.
      for (const row of rows) {
        const prev = await db.query<{ hash: string }>('SELECT hash FROM audit_records WHERE seq = $1', [
          Number(row.seq) - 1,
        ]);
        expect(prev.rows[0]?.hash ?? (Number(row.seq) === 1 ? '0'.repeat(64) : undefined)).toBe(row.prev_hash);
      }
    } finally {
      await db.end();
    }
    // A generous limit for waiting: under a loaded machine two requests and the queries can exceed
    // the default 30 s (the chain itself is checked in full, whatever the time).
  }, 90_000);

  it('exports every metric the Grafana dashboard and the alert rules query', async () => {
    const exported = exportedNames(await (await fetch(replicas[0]!.metricsUrl)).text());
    exported.add('up'); // Prometheus' own, per scrape target
    const dashboard = JSON.parse(readDeploy('grafana/switchyard-dashboard.json')) as {
      panels: { title: string; targets: { expr: string }[] }[];
    };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: p.title, expr: t.expr })));
    const rules = yamlDoc<{ groups: { rules: { alert: string; expr: string }[] }[] }>('prometheus/alerts.yaml');
    for (const r of rules.groups.flatMap((g) => g.rules)) exprs.push({ where: r.alert, expr: r.expr });
    expect(exprs.length).toBeGreaterThan(10);
    for (const { where, expr } of exprs) {
      const names = metricNames(expr);
      expect(names, where).not.toEqual([]);
      for (const name of names) expect(exported.has(name), `${where}: ${name}`).toBe(true);
    }
  });
});
