/**
 * pii-count: counts the e-mail addresses of an OpenAI-style chat exchange. The request's count
 * goes upstream in a header; the answer's (a whole JSON answer or a stream, chunk by chunk) is
 * added to it and the total reported when the answer has passed: as a trailer of a stream, a
 * header of a whole answer. It checks nothing, so it passes what it cannot read (declared).
 *
 * The example plugin of docs/plugins.md ("The exchange"): written from that page alone.
 */
import {
  definePlugin,
  type FromSchema,
  type JsonSchema,
  type OpenAIChunk,
  type OpenAIStreamReader,
  openaiWire,
  readJson,
  requestHeader,
  requestOf,
  type SseEvent,
  TextWindow,
} from '../../runtime/index.ts';

// Simple on purpose: an example, not a detector (the classifiers do that, docs/classifiers.md).
const email = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
/** Longer than any e-mail address (RFC 5321: 254): what a stream carries across chunks. */
const longest = 320;

function countIn(text: string): number {
  let n = 0;
  for (const _ of text.matchAll(email)) n++;
  return n;
}

/**
 * Counts the addresses of a stream as its chunks pass. An address may be cut between two chunks:
 * the window carries the text across them and returns each address once it is complete.
 */
class StreamCount implements OpenAIStreamReader {
  count = 0;
  readonly #window = new TextWindow(longest);

  onChunk(chunk: OpenAIChunk): undefined {
    this.count += this.#window.matches(email, chunk.text).length;
    return undefined; // every chunk passes as it came
  }

  onDone(): undefined {
    this.count += this.#window.end(email).length;
    return undefined;
  }

  onEnd(): SseEvent[] {
    this.count += this.#window.end(email).length; // a stream that ended without [DONE]
    return [];
  }
}

const optionsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    header: {
      type: 'string',
      pattern: '^[A-Za-z0-9-]+$',
      default: 'X-PII-Count',
      description: "Request header the upstream gets the request's count in",
    },
    trailer: {
      type: 'string',
      pattern: '^[A-Za-z0-9-]+$',
      default: 'X-PII-Total',
      description: 'Response trailer (a header for a whole answer) with the request’s and the answer’s count together',
    },
  },
} as const satisfies JsonSchema;
type Options = FromSchema<typeof optionsSchema>;

export default definePlugin<Options>({
  name: 'pii-count',
  description:
    'Count e-mail addresses in an OpenAI-style chat request (sent upstream in a header) and its answer, streamed too (the total as a trailer).',
  options: optionsSchema,
  // The upstream gets the count in this header: a stage that needs it runs after this one.
  provides: (o) => [requestHeader(o.header)],
  dryRun: 'run',
  // A counter checks nothing: an answer it cannot read goes on (marked), not refused.
  onUninspectable: 'pass',
  create(options) {
    return async (ctx, next) => {
      const inRequest = countIn(openaiWire.requestText(await readJson(ctx)));
      requestOf(ctx).setHeader(options.header, inRequest);
      const answer = await next(); // this stage's answer phase: the answer, bound to this stage
      if (!answer?.hasBody) return;
      if (answer.isEventStream) {
        const stream = new StreamCount();
        answer.filterOpenAIChunks(stream);
        answer.trailer(options.trailer, () => String(inRequest + stream.count));
        return;
      }
      const inAnswer = countIn(openaiWire.answerText(await answer.json()));
      answer.trailer(options.trailer, () => String(inRequest + inAnswer));
    };
  },
});
