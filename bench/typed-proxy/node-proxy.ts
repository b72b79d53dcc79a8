/**
 * Baseline: the least a Node proxy does, without a framework. node:http reads the request body,
 * forwards it with an undici keep-alive Pool (64 connections, like a Switchyard upstream) and
 * pipes the answer back as it arrives (streamed answers stay streamed). The floor under the Koa
 * baseline (bare-proxy.ts): what Koa itself costs per request is the difference.
 *
 * Env: PORT (0 = ephemeral; printed as `listening <port>`), UPSTREAM_URL.
 */

import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { serveForBench } from './serve.ts';

const upstream = new URL(process.env.UPSTREAM_URL ?? 'http://127.0.0.1:9000/');
const pool = new Pool(upstream.origin, { connections: 64, keepAliveTimeout: 60_000 });
const path = (url: string | undefined) => {
  const q = url?.indexOf('?') ?? -1;
  return upstream.pathname + (q >= 0 ? url!.slice(q) : '');
};

async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers: Record<string, string> = {};
  for (const name of ['content-type', 'accept']) {
    const v = req.headers[name];
    if (typeof v === 'string') headers[name] = v;
  }
  const method = req.method === 'GET' || req.method === 'HEAD' ? req.method : 'POST';
  const up = await pool.request({
    method,
    path: path(req.url),
    headers,
    body: method === 'POST' ? Buffer.concat(chunks) : null,
  });
  const out: Record<string, string> = {};
  for (const name of ['content-type', 'content-length']) {
    const v = up.headers[name];
    if (typeof v === 'string') out[name] = v;
  }
  res.writeHead(up.statusCode, out);
  for await (const chunk of up.body) if (!res.write(chunk)) await once(res, 'drain');
  res.end();
}

serveForBench(
  createServer({ keepAlive: true }, (req, res) => {
    handle(req, res).catch((err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(String((err as Error).message));
    });
  }),
  () => {
    pool.destroy().catch(() => {});
  },
);
