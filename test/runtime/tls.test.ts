import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../runtime/config/source.ts';
import { ServiceRuntime } from '../../runtime/service/runtime.ts';

/** A self-signed certificate for localhost / 127.0.0.1, written as `<name>.crt` and `<name>.key` in `dir`. */
function selfSigned(dir: string, name: string, cn = 'localhost'): { cert: string; key: string } {
  const cert = join(dir, `${name}.crt`);
  const key = join(dir, `${name}.key`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: 'ignore' },
  );
  return { cert, key };
}

function serviceYaml(tls: string): string {
  return `service: secure
listen: { port: 0${tls ? `, tls: ${tls}` : ''} }
logging: { level: silent }
routes:
  - match: { method: GET, path: /ok }
    pipeline: [{ respond: { body: { ok: true } } }]
`;
}

function writeService(dir: string, tls: string): string {
  const file = join(dir, 'service.yaml');
  writeFileSync(file, serviceYaml(tls));
  return file;
}

/** Subject CN of the certificate a new TLS connection to `port` is served with. */
async function servedCn(port: number, ca: string): Promise<string> {
  const socket = tlsConnect({ port, host: '127.0.0.1', ca, servername: 'localhost' });
  await once(socket, 'secureConnect');
  const cn = socket.getPeerCertificate().subject.CN;
  socket.destroy();
  return String(cn);
}

describe('TLS on the main listener', () => {
  let dir: string;
  let runtime: ServiceRuntime;
  let ca: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sy-tls-'));
    selfSigned(dir, 'server');
    ca = execFileSync('cat', [join(dir, 'server.crt')], { encoding: 'utf8' });
    // Relative paths: resolved against the config file's directory.
    runtime = await ServiceRuntime.start(writeService(dir, '{ cert: server.crt, key: server.key }'));
  });
  afterAll(() => runtime?.close());

  it('serves HTTPS to a client trusting the certificate, and tracks the connection', async () => {
    expect(runtime.info.mainUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const dispatcher = new Agent({ connect: { ca } });
    const res = await fetch(`${runtime.info.mainUrl}/ok`, { dispatcher });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true });
    const connections = runtime.info.connections?.();
    expect(connections?.active).toBe(1);
    expect(connections?.clients[0]).toMatchObject({ requests: 1, in_flight: 0 });
    await dispatcher.close();
  });

  it('refuses clients that do not trust it, and plain HTTP', async () => {
    await expect(fetch(`${runtime.info.mainUrl}/ok`)).rejects.toThrow();
    const outcome = await new Promise<string>((resolve) => {
      const plain = httpRequest({ host: '127.0.0.1', port: runtime.info.ports.main, path: '/ok' });
      plain.on('response', () => resolve('response'));
      plain.on('error', (err) => resolve(err.message));
      plain.end();
    });
    expect(outcome).toBe('socket hang up');
  });

  it('a reload serves renewed certificate files to new connections', async () => {
    const port = runtime.info.ports.main as number;
    expect(await servedCn(port, ca)).toBe('localhost');
    selfSigned(dir, 'server', 'renewed'); // same paths, new content
    const renewedCa = execFileSync('cat', [join(dir, 'server.crt')], { encoding: 'utf8' });
    expect((await runtime.reload()).ok).toBe(true);
    expect(await servedCn(port, renewedCa)).toBe('renewed');
  });
});

describe('TLS config', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sy-tls-config-'));
  beforeAll(() => {
    selfSigned(dir, 'a');
    selfSigned(dir, 'b');
  });

  async function startError(tls: string): Promise<ConfigError> {
    const file = writeService(mkdtempSync(join(dir, 'svc-')), tls);
    const err = await ServiceRuntime.start(file).then(
      async (r) => {
        await r.close();
        throw new Error('started');
      },
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }

  it('empty paths mean plain HTTP', async () => {
    const runtime = await ServiceRuntime.start(writeService(mkdtempSync(join(dir, 'svc-')), '{ cert: "", key: "" }'));
    try {
      expect(runtime.info.mainUrl).toMatch(/^http:\/\//);
      expect((await fetch(`${runtime.info.mainUrl}/ok`)).status).toBe(200);
    } finally {
      await runtime.close();
    }
  });

  it('a missing file is a config error naming the field and the path', async () => {
    const err = await startError(`{ cert: ${JSON.stringify(join(dir, 'a.crt'))}, key: missing.key }`);
    expect(err.problems[0]?.path).toBe('listen.tls.key');
    expect(err.problems[0]?.message).toMatch(/cannot read .*missing\.key: ENOENT/);
  });

  it('one of the two set without the other is a config error', async () => {
    const err = await startError(`{ cert: ${JSON.stringify(join(dir, 'a.crt'))}, key: "" }`);
    expect(err.problems[0]?.path).toBe('listen.tls.key');
    expect(err.problems[0]?.message).toMatch(/required when listen.tls.cert is set/);
  });

  it('a key that does not belong to the certificate is a config error', async () => {
    const err = await startError(
      `{ cert: ${JSON.stringify(join(dir, 'a.crt'))}, key: ${JSON.stringify(join(dir, 'b.key'))} }`,
    );
    expect(err.problems[0]?.path).toBe('listen.tls.cert');
    expect(err.problems[0]?.message).toMatch(/unusable certificate or key/);
  });
});
