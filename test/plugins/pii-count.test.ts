/**
 * pii-count (plugins/pii-count), the example of docs/plugins.md "The exchange", in a running
 * service in front of a real HTTP backend: the request's count reaches the backend in a header
 * (no forward_headers), the answer's is added, whole or streamed, and the total comes back as a
 * header or a trailer.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal } from '../helpers/servers.ts';

let seenHeader: string | undefined;

/** A chat backend: answers with two addresses, whole or streamed with one address cut across two chunks. */
function backend(req: IncomingMessage, res: ServerResponse): void {
  let body = '';
  req.on('data', (c) => {
    body += c;
  });
  req.on('end', () => {
    seenHeader = req.headers['x-pii-count'] as string | undefined;
    const stream = JSON.parse(body).stream === true;
    if (!stream) {
      const json = JSON.stringify({
        choices: [{ message: { role: 'assistant', content: 'Write to ann@example.com or bob@example.org.' } }],
      });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(json) });
      res.end(json);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const chunk = (content: string) => `data: ${JSON.stringify({ choices: [{ delta: { content } }] })}\n\n`;
    res.write(chunk('Write to ann@exa'));
    res.write(chunk('mple.com or '));
    res.write(chunk('bob@example.org'));
    res.end('data: [DONE]\n\n');
  });
}

const yaml = (url: string) => `
service: pii-demo
listen: { port: 0 }
upstreams:
  llm: { kind: http, url: "${url}" }
routes:
  - match: { method: POST, path: /v1/chat/completions }
    pipeline:
      - pii-count: {}
      - proxy: { upstream: llm }
`;

describe('pii-count in a running service', () => {
  let svc: StartedService;
  const upstream = createServer(backend);
  beforeAll(async () => {
    const url = await listenLocal(upstream);
    const file = join(mkdtempSync(join(tmpdir(), 'pii-')), 'pii.yaml');
    writeFileSync(file, yaml(url));
    svc = await startService(file);
  });
  afterAll(async () => {
    await svc?.close();
    closeNow(upstream);
  });

  const chat = (stream: boolean) =>
    request(`${svc.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'm',
        stream,
        messages: [
          { role: 'system', content: 'Never reveal admin@corp.example.' },
          { role: 'user', content: 'Mail me at me@home.example, please.' },
        ],
      }),
    });

  it("sends the request's count upstream and the total with a whole answer", async () => {
    const res = await chat(false);
    expect(res.statusCode).toBe(200);
    expect(seenHeader).toBe('2');
    expect(res.headers['x-pii-total']).toBe('4');
    expect(await res.body.json()).toMatchObject({
      choices: [{ message: { content: expect.stringContaining('ann@') } }],
    });
  });

  it('counts a streamed answer chunk by chunk (an address cut across chunks once) and sends the total as a trailer', async () => {
    const res = await chat(true);
    expect(res.statusCode).toBe(200);
    expect(res.headers.trailer).toBe('X-PII-Total');
    const text = await res.body.text();
    expect(text).toContain('data: [DONE]');
    expect(text).toContain('ann@exa'); // the chunks went through as they came
    expect(seenHeader).toBe('2');
    expect(res.trailers['x-pii-total']).toBe('4');
  });
});
