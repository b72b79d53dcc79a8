/**
 * Draining counts a response until its body is sent: a streamed answer (SSE relayed from an
 * upstream) keeps the graph it started on alive through a reload, and holds a graceful shutdown
 * back until it is done, up to `limits.drain_timeout_ms`, at which it is ended.
 */
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type StartedService, startService } from '../../runtime/testing.ts';
import { closeNow, listenLocal, until } from '../helpers/servers.ts';
import { writeServiceFile } from '../helpers/services.ts';
import { probeEvents } from './fixtures/runtime-probes.ts';

const probes = join(import.meta.dirname, 'fixtures/runtime-probes.ts');
const eventCount = 6;
const eventGapMs = 80;

/**
 * When the upstream last ended an `/events` stream (this process's clock, like the probes'): the
 * gateway ends its answer after it, and a graph closes after that, whatever the machine's load.
 */
let upstreamEndedAt = 0;

/** SSE upstream: `/events` sends `eventCount` events `eventGapMs` apart; `/forever` never ends. */
function sseServer(): Server {
  return createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    let i = 0;
    const timer = setInterval(() => {
      i++;
      res.write(`data: ${i}\n\n`);
      if (req.url === '/events' && i === eventCount) {
        clearInterval(timer);
        upstreamEndedAt = Date.now();
        res.end();
      }
    }, eventGapMs);
    res.on('close', () => clearInterval(timer));
  });
}

function serviceYaml(upstreamUrl: string, label: string, drainMs: number): string {
  return `service: drain-test
listen: { port: 0 }
admin: { port: 0 }
plugins: [${JSON.stringify(probes)}]
limits: { drain_timeout_ms: ${drainMs} }
upstreams:
  sse: { kind: http, url: ${JSON.stringify(upstreamUrl)} }
resources:
  probe: { type: probe, label: ${label} }
routes:
  - match: { method: GET, path: /events }
    pipeline: [{ proxy: { upstream: sse } }]
  - match: { method: GET, path: /forever }
    pipeline: [{ proxy: { upstream: sse } }]
`;
}

/** Reads an SSE response to its end; `onFirst` runs once the first event arrived. */
async function readEvents(
  res: Response,
  onFirst?: (data: readonly string[]) => void | Promise<void>,
): Promise<{ data: string[]; error?: unknown; endedAt: number }> {
  const data: string[] = [];
  const decoder = new TextDecoder();
  let text = '';
  let firstSeen = false;
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      for (let end = text.indexOf('\n\n'); end >= 0; end = text.indexOf('\n\n')) {
        data.push(text.slice(0, end).replace(/^data: /, ''));
        text = text.slice(end + 2);
      }
      if (!firstSeen && data.length > 0) {
        firstSeen = true;
        await onFirst?.(data);
      }
    }
  } catch (error) {
    return { data, error, endedAt: Date.now() };
  }
  return { data, endedAt: Date.now() };
}

const allEvents = Array.from({ length: eventCount }, (_, i) => String(i + 1));

describe('draining waits for streamed responses', () => {
  let upstream: Server;
  let upstreamUrl: string;

  beforeAll(async () => {
    upstream = sseServer();
    upstreamUrl = await listenLocal(upstream);
  });
  afterAll(() => closeNow(upstream));

  it('a reload while a stream flows: the stream completes, the old graph closes only afterwards', async () => {
    const file = writeServiceFile(serviceYaml(upstreamUrl, 'reload-v1', 5000));
    const svc = await startService(file);
    try {
      const res = await fetch(`${svc.url}/events`);
      expect(res.headers.get('content-type')).toMatch(/event-stream/);
      let reloadedAt = 0;
      const stream = await readEvents(res, async () => {
        writeServiceFile(serviceYaml(upstreamUrl, 'reload-v2', 5000), join(file, '..'));
        const out = await (await fetch(`${svc.adminUrl}/admin/reload`, { method: 'POST' })).json();
        expect(out).toMatchObject({ ok: true, changed: true });
        reloadedAt = Date.now();
        // The stream is still running on the old graph, which is not closed yet.
        expect(probeEvents().find((e) => e.label === 'reload-v1')).toBeUndefined();
        const status = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
        expect(status.draining_graphs).toBe(1);
      });
      expect(stream.error).toBeUndefined();
      expect(stream.data).toEqual(allEvents);
      expect(reloadedAt).toBeGreaterThan(0);
      await until(() => probeEvents().some((e) => e.label === 'reload-v1'), 3000);
      const closed = probeEvents().find((e) => e.label === 'reload-v1') as { closedAt: number };
      // Causal order, not a time: the old graph closed after the upstream ended the stream.
      expect(closed.closedAt).toBeGreaterThanOrEqual(upstreamEndedAt);
      expect(probeEvents().some((e) => e.label === 'reload-v2')).toBe(false);
    } finally {
      await svc.close();
    }
    expect(probeEvents().some((e) => e.label === 'reload-v2')).toBe(true);
  });

  it('close() waits for a stream in flight, including one on a replaced graph, then closes every graph', async () => {
    const file = writeServiceFile(serviceYaml(upstreamUrl, 'close-v1', 5000));
    const svc: StartedService = await startService(file);
    const res = await fetch(`${svc.url}/events`);
    let closing: Promise<void> | undefined;
    let closedAt = 0;
    const stream = await readEvents(res, async () => {
      // Replace the graph under the stream, then stop the service.
      writeServiceFile(serviceYaml(upstreamUrl, 'close-v2', 5000), join(file, '..'));
      expect((await svc.runtime.reload()).ok).toBe(true);
      closing = svc.close().then(() => {
        closedAt = Date.now();
      });
    });
    await closing;
    expect(stream.error).toBeUndefined();
    expect(stream.data).toEqual(allEvents);
    expect(closedAt).toBeGreaterThanOrEqual(upstreamEndedAt);
    // The replaced graph still draining was closed by close(), not left to its drain timer.
    const labels = probeEvents().map((e) => e.label);
    expect(labels).toContain('close-v1');
    expect(labels).toContain('close-v2');
  });

  it('close() stops waiting at the drain timeout and ends an event stream that does not end, cleanly', async () => {
    const drainMs = 1000;
    const file = writeServiceFile(serviceYaml(upstreamUrl, 'timeout-v1', drainMs));
    const svc = await startService(file);
    const res = await fetch(`${svc.url}/forever`);
    let started = 0;
    let stoppedAfter = 0;
    let closing: Promise<void> | undefined;
    let seenAtClose = 0;
    const stream = await readEvents(res, (data) => {
      seenAtClose = data.length;
      started = Date.now();
      closing = svc.close().then(() => {
        stoppedAfter = Date.now() - started;
      });
    });
    await closing;
    // Ended where the last event stopped, not reset: an SSE client sees the stream end.
    expect(stream.error).toBeUndefined();
    // It flowed on while draining (a gap of 80 ms against a drain of 1 s: a count, not a time).
    expect(stream.data.length).toBeGreaterThan(seenAtClose);
    // Not before the drain timeout (a timer never fires early); no upper bound on a loaded machine:
    // the stream never ends, so a close that did not end it at the timeout would never resolve.
    expect(stoppedAfter).toBeGreaterThanOrEqual(drainMs - 30);
    expect(probeEvents().some((e) => e.label === 'timeout-v1')).toBe(true);
  });

  it('a response that never started streaming does not hold a reload back', async () => {
    const file = writeServiceFile(serviceYaml(upstreamUrl, 'quick-v1', 5000));
    const svc = await startService(file);
    try {
      const res = await fetch(`${svc.url}/nowhere`);
      expect(res.status).toBe(404);
      await res.text();
      writeServiceFile(serviceYaml(upstreamUrl, 'quick-v2', 5000), join(file, '..'));
      expect((await svc.runtime.reload()).ok).toBe(true);
      await until(() => probeEvents().some((e) => e.label === 'quick-v1'), 1000);
      const status = svc.runtime.status();
      expect(status).toMatchObject({ in_flight: 0, open_responses: 0, draining_graphs: 0 });
    } finally {
      await svc.close();
    }
  });
});
