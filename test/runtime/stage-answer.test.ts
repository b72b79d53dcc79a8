/**
 * The stage-bound answer handle (`const answer = await next()`): each stage's stream filters run
 * under its own `on_uninspectable`, whichever way it added them; the adapter that makes what a
 * Koa-style stage wrote on `ctx.body` the request's answer, both ways round; and the OpenAI
 * stream's text window.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import {
  answerOf,
  type OnUninspectable,
  type OpenAIStreamReader,
  openaiStreamData,
  respond,
  type SseEvent,
  type Stage,
  TextWindow,
} from '../../runtime/index.ts';
import { serveStages } from '../helpers/stage-harness.ts';

const chunk = (content: string) => `data: ${JSON.stringify({ choices: [{ delta: { content } }] })}\n\n`;

/** A Koa-style terminal stage: an OpenAI stream with one event that is not JSON. */
const badStream: Stage = async (ctx) => {
  ctx.type = 'text/event-stream';
  ctx.body = Readable.from([chunk('one'), 'data: not json\n\n', chunk('two'), 'data: [DONE]\n\n']);
};

/** Reads chunks and ends a refused stream with an event naming the stage. */
class Reader implements OpenAIStreamReader {
  chunks = 0;
  constructor(private readonly name: string) {}
  onChunk(): undefined {
    this.chunks++;
    return undefined;
  }
  refuse(): SseEvent[] {
    return [{ event: 'error', data: `refused by ${this.name}` }];
  }
}

/** A stage reading the stream through its own handle. */
function viaHandle(name: string): Stage {
  return async (_ctx, next) => {
    const answer = await next();
    answer?.filterOpenAIChunks(new Reader(name));
  };
}

/** The same through the unbound store (a stage not moved to the handle yet). */
function viaAnswerOf(name: string): Stage {
  return async (ctx, next) => {
    await next();
    answerOf(ctx).filterOpenAIChunks(new Reader(name));
  };
}

async function run(stages: Stage[], settings: OnUninspectable[]) {
  const server = await serveStages(stages, { onUninspectable: settings });
  try {
    const res = await fetch(`${server.url}/`);
    const body = await res.text();
    const metric = await server.metrics.registry.getSingleMetricAsString('switchyard_answers_unchecked_total');
    const outcome = (stage: number) =>
      /outcome="(\w+)"/.exec(metric.split('\n').find((l) => l.includes(`stage="r:stage.${stage}"`)) ?? '')?.[1];
    return { body, outer: outcome(0), inner: outcome(1) };
  } finally {
    server.close();
  }
}

describe('the stage-bound answer handle', () => {
  it('two stages filtering the same stream each run under their own on_uninspectable', async () => {
    // Inner passes what it cannot read, outer refuses it: the outer one ends the stream.
    const a = await run([viaHandle('outer'), viaHandle('inner'), badStream], ['refuse', 'pass', 'refuse']);
    expect(a).toMatchObject({ inner: 'passed', outer: 'refused' });
    expect(a.body).toContain('refused by outer');
    expect(a.body).not.toContain('two');

    // The other way round: the inner one refuses, its ending passes the outer one (which passes
    // its own error event, not JSON, unread).
    const b = await run([viaHandle('outer'), viaHandle('inner'), badStream], ['pass', 'refuse', 'refuse']);
    expect(b).toMatchObject({ inner: 'refused', outer: 'passed' });
    expect(b.body).toContain('refused by inner');
    expect(b.body).not.toContain('refused by outer');
  });

  it('a filter added through answerOf(ctx) is bound to the stage that added it', async () => {
    const a = await run([viaAnswerOf('outer'), viaHandle('inner'), badStream], ['refuse', 'pass', 'refuse']);
    expect(a).toMatchObject({ inner: 'passed', outer: 'refused' });
    expect(a.body).toContain('refused by outer');
    const b = await run([viaHandle('outer'), viaAnswerOf('inner'), badStream], ['pass', 'refuse', 'refuse']);
    expect(b).toMatchObject({ inner: 'refused', outer: 'passed' });
  });

  it('knows its stage and setting', async () => {
    let seen: unknown;
    const probe: Stage = async (_ctx, next) => {
      const answer = await next();
      seen = { stage: answer?.stageId, setting: answer?.onUninspectable };
    };
    const answers: Stage = async (ctx) => {
      respond(ctx, { ok: true });
    };
    await run([probe, answers], ['pass', 'refuse']);
    expect(seen).toEqual({ stage: 'r:stage.0', setting: 'pass' });
  });
});

describe('the adapter for stages that write ctx.body', () => {
  async function get(stages: Stage[]) {
    const server = await serveStages(stages);
    try {
      const res = await fetch(`${server.url}/`);
      return { status: res.status, type: res.headers.get('content-type'), body: await res.text() };
    } finally {
      server.close();
    }
  }

  it("a Koa-style terminal stage's answer is the store's: a handle reads and replaces it", async () => {
    const koaTerminal: Stage = async (ctx) => {
      ctx.status = 201;
      ctx.body = { n: 1 };
    };
    const doubler: Stage = async (_ctx, next) => {
      const answer = await next();
      if (!answer) return;
      const body = (await answer.json()) as { n: number };
      answer.setJson({ n: body.n * 2 });
    };
    expect(await get([doubler, koaTerminal])).toMatchObject({ status: 201, body: '{"n":2}' });
  });

  it('a Koa-style stage setting ctx.body after next() replaces the answer', async () => {
    const terminal: Stage = async (ctx) => {
      respond(ctx, { from: 'terminal' });
    };
    const koaReplacer: Stage = async (ctx, next) => {
      await next();
      ctx.status = 203;
      ctx.body = 'replaced';
    };
    let inner: unknown;
    const reader: Stage = async (_ctx, next) => {
      inner = await (await next())?.json();
    };
    const outer: Stage = async (_ctx, next) => {
      const answer = await next();
      answer?.trailer('X-Seen', () => String(answer.status));
    };
    const res = await get([outer, koaReplacer, reader, terminal]);
    expect(inner).toEqual({ from: 'terminal' });
    expect(res).toMatchObject({ status: 203, body: 'replaced' });
  });

  it('respond: a value is JSON, a string text, null no body', async () => {
    expect(await get([async (ctx) => void respond(ctx, { a: 1 }, { status: 202 })])).toEqual({
      status: 202,
      type: 'application/json; charset=utf-8',
      body: '{"a":1}',
    });
    expect(await get([async (ctx) => void respond(ctx, '<p>hi</p>', { type: 'text/html; charset=utf-8' })])).toEqual({
      status: 200,
      type: 'text/html; charset=utf-8',
      body: '<p>hi</p>',
    });
    expect(await get([async (ctx) => void respond(ctx, null)])).toMatchObject({ status: 204, body: '' });
  });
});

describe('TextWindow', () => {
  const word = /secret-\d+/g;

  it('finds each match once, across chunks, when it is complete', () => {
    const w = new TextWindow(32);
    expect(w.matches(word, 'a secr').map((m) => m[0])).toEqual([]);
    expect(w.matches(word, 'et-12').map((m) => m[0])).toEqual([]); // may still grow
    expect(w.matches(word, '3 and secret-4 ').map((m) => m[0])).toEqual(['secret-123', 'secret-4']);
    expect(w.matches(word, 'then secret-5').map((m) => m[0])).toEqual([]);
    expect(w.end(word).map((m) => m[0])).toEqual(['secret-5']);
    expect(w.held).toBe('');
  });

  it('carries at most its bound, and refuses a pattern that is not global', () => {
    const w = new TextWindow(8);
    w.matches(word, 'x'.repeat(100));
    expect(w.held.length).toBe(8);
    expect(() => w.matches(/secret/, 'a')).toThrow(/global/);
    expect(() => new TextWindow(0)).toThrow(RangeError);
  });
});

describe('openaiStreamData', () => {
  it("yields each event's data up to [DONE], framing across reads included", async () => {
    const body = Readable.from(
      ['data: {"a"', ':1}\n\ndata: two\n', '\ndata: [DONE]\n\ndata: after\n\n'].map((s) => Buffer.from(s)),
    );
    const seen: string[] = [];
    for await (const data of openaiStreamData(body)) seen.push(data);
    expect(seen).toEqual(['{"a":1}', 'two']);
  });
});
