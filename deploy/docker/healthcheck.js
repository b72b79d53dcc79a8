// Container healthcheck (no curl in the image): exit 0 when SWITCHYARD_HEALTH_URL answers 2xx
// within 2.5 s. A Host of 127.0.0.1 passes the Host check of every config.
const url = process.env.SWITCHYARD_HEALTH_URL ?? 'http://127.0.0.1:9443/health';
fetch(url, { signal: AbortSignal.timeout(2500) }).then(
  (res) => {
    process.stdout.write(`${url} ${res.status}\n`);
    process.exit(res.ok ? 0 : 1);
  },
  (err) => {
    process.stdout.write(`${url} ${err.message}\n`);
    process.exit(1);
  },
);
