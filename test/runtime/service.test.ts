import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';

const fixtures = join(import.meta.dirname, '../fixtures');

const json = { 'content-type': 'application/json' };

describe('a service started from its config', () => {
  let svc: StartedService;
  let dir: string;
  let file: string;

  beforeAll(async () => {
    // A copy, so the reload tests can edit it.
    dir = mkdtempSync(join(tmpdir(), 'sy-basic-'));
    file = join(dir, 'basic.yaml');
    copyFileSync(join(fixtures, 'basic.yaml'), file);
    copyFileSync(join(fixtures, 'test-stages.ts'), join(dir, 'test-stages.ts'));
    writeFileSync(file, readFileSync(file, 'utf8').replace('./test-stages.ts', join(fixtures, 'test-stages.ts')));
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  it('answers a route and puts a request id on the response', async () => {
    const res = await fetch(`${svc.url}/echo`);
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.text).toBe('first');
    expect(res.headers.get('x-request-id')).toBe(body.request_id);
    expect(body.mode).toBe('strict');
  });

  it('keeps a safe incoming request id and passes route params', async () => {
    const res = await fetch(`${svc.url}/items/a%20b`, { headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    expect((await res.json()).params).toEqual({ id: 'a b' });
  });

  it('continues the caller trace in traceparent with a new span', async () => {
    const incoming = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    const body = await (await fetch(`${svc.url}/echo`, { headers: { traceparent: incoming } })).json();
    expect(body.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(body.traceparent).not.toBe(incoming);
    const fresh = await (await fetch(`${svc.url}/echo`)).json();
    expect(fresh.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });

  it('404 for an unknown path and 405 with Allow for a wrong method, in the service dialect', async () => {
    const nf = await fetch(`${svc.url}/nope`);
    expect(nf.status).toBe(404);
    expect(await nf.json()).toMatchObject({ error: 'not_found' });
    const na = await fetch(`${svc.url}/slow`, { method: 'DELETE' });
    expect(na.status).toBe(405);
    expect(na.headers.get('allow')).toBe('GET');
  });

  it('answers 413 to a body over the limit, and the client receives the status', async () => {
    const res = await fetch(`${svc.url}/echo`, {
      method: 'POST',
      headers: json,
      body: JSON.stringify({ x: 'y'.repeat(5000) }),
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: 'payload_too_large' });
  });

  it('answers 413 to a large chunked body without a content-length', async () => {
    const chunks = new ReadableStream({
      start(c) {
        for (let i = 0; i < 64; i++) c.enqueue(new TextEncoder().encode('x'.repeat(1024)));
        c.close();
      },
    });
    const res = await fetch(`${svc.url}/echo`, {
      method: 'POST',
      headers: json,
      body: chunks,
      duplex: 'half',
    } as RequestInit);
    expect(res.status).toBe(413);
  });

  it('rejects malformed JSON and too deep nesting with 400, never 500', async () => {
    const bad = await fetch(`${svc.url}/echo`, { method: 'POST', headers: json, body: '{"a":' });
    expect(bad.status).toBe(400);
    const deep = await fetch(`${svc.url}/echo`, {
      method: 'POST',
      headers: json,
      body: '['.repeat(20) + ']'.repeat(20),
    });
    expect(deep.status).toBe(400);
    expect((await deep.json()).message).toMatch(/nesting/);
    const latin1 = await fetch(`${svc.url}/echo`, {
      method: 'POST',
      headers: json,
      body: Buffer.from([0x7b, 0xff, 0x7d]),
    });
    expect(latin1.status).toBe(400);
  });

  it('fail-closed stage answers 500 without leaking internals; fail-open skips the stage', async () => {
    const closed = await fetch(`${svc.url}/fail-closed`);
    expect(closed.status).toBe(500);
    const text = await closed.text();
    expect(text).not.toMatch(/boom/);
    const open = await fetch(`${svc.url}/fail-open`);
    expect(open.status).toBe(200);
    expect((await open.json()).failed_open).toEqual(['GET /fail-open:test-fail']);
    const metrics = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(metrics).toMatch(/switchyard_stage_failures_total\{[^}]*on_error="fail-open"[^}]*\} 1/);
    expect(metrics).toMatch(/switchyard_stage_failures_total\{[^}]*on_error="fail-closed"[^}]*\} 1/);
  });

  it('a typed rejection is a decision, not a failure: fail-open does not skip it', async () => {
    const res = await fetch(`${svc.url}/deny`);
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32603, message: 'Policy violation' } });
  });

  it('caps concurrent requests with 503 overloaded', async () => {
    const all = await Promise.all(Array.from({ length: 8 }, () => fetch(`${svc.url}/slow`)));
    const statuses = all.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200).length).toBe(4);
    expect(statuses.filter((s) => s === 503).length).toBe(4);
  });

  it('exposes request metrics on the metrics listener', async () => {
    const text = await (await fetch(`${svc.metricsUrl}/metrics`)).text();
    expect(text).toMatch(/switchyard_requests_total\{[^}]*route="GET,POST \/echo"/);
    expect(text).toMatch(/switchyard_request_duration_seconds_bucket/);
  });

  it('config status tells what runs now', async () => {
    const status = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
    expect(status.service).toBe('basic');
    expect(status.config_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(status.plugins).toEqual(['test-echo', 'test-fail', 'test-sleep']);
    expect(status.routes.map((r: { id: string }) => r.id)).toContain('GET /items/:id');
    expect(status.routes.find((r: { id: string }) => r.id === 'GET /fail-open').stages[0].on_error).toBe('fail-open');
  });

  it('hot reload: a bad config changes nothing and says where it is wrong', async () => {
    const before = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
    const good = readFileSync(file, 'utf8');
    writeFileSync(file, good.replace('test-echo: { text:', 'test-echo: { colour: red, text:'));
    const res = await fetch(`${svc.adminUrl}/admin/reload`, { method: 'POST' });
    expect(res.status).toBe(422);
    const out = await res.json();
    expect(out.status).toBe('failed');
    expect(out.problems[0]).toMatchObject({ line: 13, path: 'routes[0].pipeline[0].test-echo.colour' });
    expect((await (await fetch(`${svc.url}/echo`)).json()).text).toBe('first');
    const after = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
    expect(after.config_hash).toBe(before.config_hash);
    expect(after.last_reload.ok).toBe(false);
    writeFileSync(file, good);
  });

  it('hot reload swaps atomically; a request in flight finishes on the old graph', async () => {
    const good = readFileSync(file, 'utf8');
    const slow = fetch(`${svc.url}/slow`).then((r) => r.json());
    await new Promise((r) => setTimeout(r, 100));
    writeFileSync(file, good.replace('text: slow', 'text: slower').replace('${ECHO_TEXT:-first}', 'second'));
    const res = await fetch(`${svc.adminUrl}/admin/reload`, { method: 'POST' });
    const out = await res.json();
    expect(out.error).toBeUndefined();
    expect(res.status).toBe(200);
    expect(out).toMatchObject({ status: 'reloaded', ok: true, changed: true });
    expect((await slow).text).toBe('slow');
    expect((await (await fetch(`${svc.url}/echo`)).json()).text).toBe('second');
    expect((await (await fetch(`${svc.url}/slow`)).json()).text).toBe('slower');
    writeFileSync(file, good);
  });
});
