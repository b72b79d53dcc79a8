/**
 * Baseline (b): the least a Koa + undici proxy does (koa-floor.ts), as a process. It reads the
 * request body, forwards it with an undici keep-alive Pool and streams the answer back
 * (BARE_BUFFER=1: reads the answer whole and sends it as a Buffer, the floor `npm run bench`
 * compares with). Whatever the typed proxy costs beyond this is the price of its pipeline.
 *
 * Env: PORT (0 = ephemeral; printed as `listening <port>`), UPSTREAM_URL, BARE_BUFFER.
 */
import { createServer } from 'node:http';
import { koaFloor } from './koa-floor.ts';
import { serveForBench } from './serve.ts';

const { app, pool } = koaFloor(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:9000/', process.env.BARE_BUFFER === '1');

serveForBench(createServer({ keepAlive: true }, app.callback()), () => {
  pool.destroy().catch(() => {});
});
