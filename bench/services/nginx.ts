/**
 * The C floor: nginx as a reverse proxy in one process (`master_process off`, one worker's work in
 * the process started, so its CPU counters are the proxy's), one listener per upstream, keep-alive
 * on both sides, no access log. Only when an `nginx` binary is installed; the bench never
 * requires it.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, type Started, start } from '../typed-proxy/children.ts';

/** The nginx binary, when there is one on PATH (or in /usr/sbin, where Debian puts it). */
export function nginxBinary(): string | undefined {
  for (const candidate of ['nginx', '/usr/sbin/nginx']) {
    if (spawnSync(candidate, ['-v'], { stdio: 'ignore' }).status === 0) return candidate;
  }
  return undefined;
}

/** Starts nginx proxying one free port to each upstream (the path passed as requested); resolves with those ports. */
export async function startNginx(
  binary: string,
  upstreams: URL[],
  dir: string,
  cpu: string | undefined,
): Promise<{ s: Started; ports: number[] }> {
  const ports: number[] = [];
  for (const _ of upstreams) ports.push(await freePort());
  const temp = join(dir, 'nginx');
  mkdirSync(temp, { recursive: true });
  const servers = upstreams.map(
    (u, i) => `
  upstream u${i} { server ${u.host}; keepalive 64; keepalive_requests 100000000; }
  server {
    listen 127.0.0.1:${ports[i]};
    location / {
      proxy_pass http://u${i};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }`,
  );
  const conf = join(temp, 'nginx.conf');
  writeFileSync(
    conf,
    `daemon off;
master_process off;
worker_processes 1;
pid ${join(temp, 'nginx.pid')};
error_log ${join(temp, 'error.log')} warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_timeout 120s;
  keepalive_requests 100000000;
  client_body_temp_path ${temp}/body;
  proxy_temp_path ${temp}/proxy;
  fastcgi_temp_path ${temp}/fastcgi;
  uwsgi_temp_path ${temp}/uwsgi;
  scgi_temp_path ${temp}/scgi;${servers.join('')}
}
`,
  );
  const s = start(binary, ['-c', conf, '-p', temp], { cpu, cwd: temp, logFile: join(temp, 'stdout.log') });
  return { s, ports };
}
