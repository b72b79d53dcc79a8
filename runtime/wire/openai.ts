/**
 * What text a model reads in an OpenAI-style body, and what text an answer carries: the one
 * reader of the wire format for every check (classification, masking, the streamed egress check,
 * the audit trail). Pure functions, no I/O.
 *
 * Fail closed: a field a model (or, for answers, the client) could read is read, whatever the
 * `type` beside it says. `type` is never consulted: a content part typed `"TEXT"`, `"image_url"`
 * or anything else has its `text` and `refusal` read all the same, and a tool of any type has its
 * `function` and `custom` members read. Token-id prompts, images, audio and file data are not text
 * and are not read.
 *
 * Requests (`requestText`, `maskRequest`), in this order:
 *   - every message of `messages` (MESSAGE FIELDS below), then
 *   - `prompt` (a string, or the strings of an array), `suffix`, `prediction.content` (a string
 *     or of each part its `text`),
 *   - `tools[]`: `function.name`, `function.description`, every string of `function.parameters`;
 *     `custom.name`, `custom.description`, every string of `custom.format`,
 *   - legacy `functions[]`: `name`, `description`, every string of `parameters`,
 *   - `response_format.json_schema`: `name`, `description`, every string of `schema`.
 * "Every string" of such JSON (a schema the model is shown) means keys and string values at any
 * depth; a message's `tool_calls[].function.arguments` (or `function_call.arguments`, `custom.input`)
 * that is JSON rather than a string is read the same way.
 *
 * MESSAGE FIELDS, in this order: `content` (a string, or of each part its `text` then `refusal`),
 * `name`, `refusal`, `reasoning_content`, `reasoning` (answer fields of OpenAI-compatible servers),
 * `function_call.name`, `function_call.arguments`, of each of `tool_calls[]` its
 * `function.name`, `function.arguments`, `custom.name`, `custom.input`, then `audio.transcript`.
 *
 * Answers (`answerText`, `maskAnswer`) and streamed chunks (`chunkText`, `mapChunkText`), in this
 * order: of each of `choices[]` the MESSAGE FIELDS of `message` then of `delta`, then `text`;
 * finally the error's `error.message` (or `error` when it is a string). JSON (not string)
 * arguments are read whole in answers as in requests; in chunks only strings are read (streamed
 * arguments are string fragments, and a chunk's fields are mapped one for one).
 *
 * Log probabilities spell the answer's text again, token by token (`logprobs.content[].token`,
 * `logprobs.refusal[].token`, the completions API's `logprobs.tokens[]`, and every
 * `top_logprobs` alternative). A whole answer's are read too, as one text per choice (its tokens
 * concatenated, after the choice's other fields); masking anything in that text removes the
 * choice's `logprobs` (a token list cannot be masked in place). In streamed chunks they are not
 * read (the text they spell is the chunk's own), and a chunk whose text `mapChunkText` changes
 * loses its `logprobs`: they would spell the text as it was.
 *
 * Bound: arbitrary JSON (tool parameters, schemas, JSON arguments) is walked at most 32 levels
 * deep and over at most 20,000 keys and items per body (`jsonWalkLimits`). What lies beyond is
 * still read, as its JSON text (one `JSON.stringify`, linear in its size), and masked as that
 * text: a hostile body costs a walk proportional to its size and never loses a field.
 */

import { type Holder, jsonWalkLimits, type WalkBudget, walkJson } from './json-walk.ts';

/** A callback that masks a text (returns it unchanged when there is nothing to mask). */
export type TextMask = (text: string) => Promise<string> | string;

/** The bounds of a walk of arbitrary JSON inside one body (see the module comment). */
export { jsonWalkLimits };

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Receives the text fields of a body in their documented order. `holder[key]` is where a field
 * lives; `kind` says what it is: a string value, a property name inside walked JSON (`name`),
 * JSON beyond the walk's bound read as its JSON text (`rest`), or the text a choice's `logprobs`
 * spell (`spelled`: removed, not rewritten, when masked).
 */
interface FieldVisitor {
  field(holder: Holder, key: string | number, text: string, kind: FieldKind): void;
}
type FieldKind = 'value' | 'name' | 'rest' | 'spelled';

/** `holder[key]`, when it is a string. */
function visitString(holder: Json, key: string, v: FieldVisitor): void {
  const value = holder[key];
  if (typeof value === 'string') v.field(holder, key, value, 'value');
}

/** Every string of `holder[key]`: keys and string values, bounded (runtime/wire/json-walk.ts). */
function visitJson(holder: Holder, key: string | number, v: FieldVisitor, budget: WalkBudget): void {
  walkJson(holder, key, (h, k, text, kind) => v.field(h, k, text, kind), budget, true);
}

/** A string field that may also come as JSON (arguments): read whole in requests. */
function visitArgument(holder: Json, key: string, v: FieldVisitor, budget: WalkBudget | undefined): void {
  if (budget && typeof holder[key] === 'object') visitJson(holder, key, v, budget);
  else visitString(holder, key, v);
}

/** The MESSAGE FIELDS of a message, an answer's `message` or a chunk's `delta`. */
function visitMessage(m: Json, v: FieldVisitor, budget: WalkBudget | undefined): void {
  const content = m.content;
  if (typeof content === 'string') v.field(m, 'content', content, 'value');
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (!isObject(part)) continue;
      visitString(part, 'text', v);
      visitString(part, 'refusal', v);
    }
  }
  visitString(m, 'name', v);
  visitString(m, 'refusal', v);
  visitString(m, 'reasoning_content', v);
  visitString(m, 'reasoning', v);
  const legacy = m.function_call;
  if (isObject(legacy)) {
    visitString(legacy, 'name', v);
    visitArgument(legacy, 'arguments', v, budget);
  }
  const calls = m.tool_calls;
  if (Array.isArray(calls)) {
    for (const call of calls) {
      if (!isObject(call)) continue;
      const fn = call.function;
      if (isObject(fn)) {
        visitString(fn, 'name', v);
        visitArgument(fn, 'arguments', v, budget);
      }
      const custom = call.custom;
      if (isObject(custom)) {
        visitString(custom, 'name', v);
        visitArgument(custom, 'input', v, budget);
      }
    }
  }
  const audio = m.audio;
  if (isObject(audio)) visitString(audio, 'transcript', v);
}

/** A tool or function definition the model is shown: name, description, and its schema's strings. */
function visitDefinition(d: Json, schemaKey: string, v: FieldVisitor, budget: WalkBudget): void {
  visitString(d, 'name', v);
  visitString(d, 'description', v);
  visitJson(d, schemaKey, v, budget);
}

function visitRequest(body: unknown, v: FieldVisitor): void {
  if (!isObject(body)) return;
  const budget: WalkBudget = { entries: jsonWalkLimits.entries };
  const messages = body.messages;
  if (Array.isArray(messages)) {
    for (const message of messages) if (isObject(message)) visitMessage(message, v, budget);
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') v.field(body, 'prompt', prompt, 'value');
  else if (Array.isArray(prompt)) {
    for (let i = 0; i < prompt.length; i++) {
      const p = prompt[i];
      if (typeof p === 'string') v.field(prompt, i, p, 'value');
    }
  }
  visitString(body, 'suffix', v);
  // Predicted outputs: text the answer is built from (and sent to the backend like a prompt).
  const prediction = body.prediction;
  if (isObject(prediction)) visitMessage(prediction, v, budget);
  const tools = body.tools;
  if (Array.isArray(tools)) {
    for (const tool of tools) {
      if (!isObject(tool)) continue;
      if (isObject(tool.function)) visitDefinition(tool.function, 'parameters', v, budget);
      if (isObject(tool.custom)) visitDefinition(tool.custom, 'format', v, budget);
    }
  }
  const functions = body.functions;
  if (Array.isArray(functions)) {
    for (const fn of functions) if (isObject(fn)) visitDefinition(fn, 'parameters', v, budget);
  }
  const format = body.response_format;
  if (isObject(format) && isObject(format.json_schema)) visitDefinition(format.json_schema, 'schema', v, budget);
}

/** Answers and streamed chunks alike: choices' `message` and `delta`, their `text`, the error. */
function visitAnswer(body: unknown, v: FieldVisitor): void {
  visitChoices(body, v, undefined);
}

/** A whole answer: the same, and JSON (not string) arguments read whole, as in requests. */
function visitWholeAnswer(body: unknown, v: FieldVisitor): void {
  visitChoices(body, v, { entries: jsonWalkLimits.entries });
}

/**
 * `budget` undefined: string fields only (streamed chunks, whose arguments are string fragments;
 * their fields are mapped one for one, never renamed).
 */
function visitChoices(body: unknown, v: FieldVisitor, budget: WalkBudget | undefined): void {
  if (!isObject(body)) return;
  const choices = body.choices;
  if (Array.isArray(choices)) {
    for (const choice of choices) {
      if (!isObject(choice)) continue;
      if (isObject(choice.message)) visitMessage(choice.message, v, budget);
      if (isObject(choice.delta)) visitMessage(choice.delta, v, budget);
      visitString(choice, 'text', v);
      if (budget) visitLogprobs(choice, v);
    }
  }
  const error = body.error;
  if (typeof error === 'string') v.field(body, 'error', error, 'value');
  else if (isObject(error)) visitString(error, 'message', v);
}

/**
 * The text a choice's log probabilities spell: every token, and every alternative of
 * `top_logprobs`, concatenated (the alternatives after the chosen tokens).
 */
function visitLogprobs(choice: Json, v: FieldVisitor): void {
  const lp = choice.logprobs;
  if (!isObject(lp)) return;
  let chosen = '';
  let alternatives = '';
  const addAlternatives = (top: unknown) => {
    if (Array.isArray(top)) {
      for (const t of top) if (isObject(t) && typeof t.token === 'string') alternatives += t.token;
    } else if (isObject(top)) {
      for (const token in top) alternatives += token; // the completions API: { token: logprob }
    }
  };
  for (const list of [lp.content, lp.refusal]) {
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      if (!isObject(entry)) continue;
      if (typeof entry.token === 'string') chosen += entry.token;
      addAlternatives(entry.top_logprobs);
    }
  }
  if (Array.isArray(lp.tokens)) for (const t of lp.tokens) if (typeof t === 'string') chosen += t;
  if (Array.isArray(lp.top_logprobs)) for (const top of lp.top_logprobs) addAlternatives(top);
  const text = alternatives === '' ? chosen : `${chosen}\n${alternatives}`;
  if (text !== '') v.field(choice, 'logprobs', text, 'spelled');
}

/** Removes the log probabilities of every choice of a chunk or answer (they would spell text that was changed). */
function dropLogprobs(body: Json): void {
  const choices = body.choices;
  if (!Array.isArray(choices)) return;
  for (const choice of choices) if (isObject(choice) && choice.logprobs != null) choice.logprobs = null;
}

/** Collects the fields' texts, joined by a separator. Reused (no state survives a call). */
class TextCollector implements FieldVisitor {
  text = '';
  constructor(private readonly separator: string) {}
  field(_holder: Holder, _key: string | number, text: string): void {
    if (text === '') return;
    this.text = this.text === '' ? text : this.text + this.separator + text;
  }
  take(): string {
    const text = this.text;
    this.text = '';
    return text;
  }
}
const joined = new TextCollector('\n');
const concatenated = new TextCollector('');

/** The text `visit` finds in `body`; the shared collector is left empty even when the walk throws. */
function collect(visit: (body: unknown, v: FieldVisitor) => void, body: unknown, c: TextCollector): string {
  try {
    visit(body, c);
  } catch (err) {
    c.take();
    throw err;
  }
  return c.take();
}

/** A field to rewrite: where it lives, its text, its kind. */
interface Slot {
  holder: Holder;
  key: string | number;
  text: string;
  kind: FieldKind;
}

class SlotCollector implements FieldVisitor {
  readonly slots: Slot[] = [];
  field(holder: Holder, key: string | number, text: string, kind: FieldKind): void {
    this.slots.push({ holder, key, text, kind });
  }
}

/**
 * Masks every slot (all at once: a classifier set batches the calls of one turn), then writes the
 * results in place: values first, then renamed keys (renaming rebuilds the object's keys, keeping
 * their order and the values just written).
 */
async function rewrite(slots: Slot[], mask: TextMask): Promise<boolean> {
  if (slots.length === 0) return false;
  const masked = await Promise.all(slots.map((s) => mask(s.text)));
  let changed = false;
  let renames: Map<Json, Map<string, string>> | undefined;
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i];
    const out = masked[i];
    if (out === slot.text) continue;
    changed = true;
    if (slot.kind === 'value') (slot.holder as Json)[slot.key as string] = out;
    else if (slot.kind === 'spelled') (slot.holder as Json)[slot.key as string] = null;
    else if (slot.kind === 'rest') (slot.holder as Json)[slot.key as string] = parseMasked(out);
    else {
      renames ??= new Map();
      let names = renames.get(slot.holder as Json);
      if (!names) {
        names = new Map();
        renames.set(slot.holder as Json, names);
      }
      names.set(slot.text, out);
    }
  }
  for (const [holder, names] of renames ?? []) renameKeys(holder, names);
  return changed;
}

/** Masked JSON text back as JSON; when masking broke its syntax, the masked text itself (nothing unmasked goes on). */
function parseMasked(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Renames keys in place, in their order. Two keys masked to the same name keep the last one's
 * value (a property name holding personal data is not worth keeping apart).
 */
function renameKeys(holder: Json, names: Map<string, string>): void {
  const entries = Object.entries(holder);
  for (const [k] of entries) delete holder[k];
  for (const [k, value] of entries) {
    // defineProperty: a key such as "__proto__" stays a plain property.
    Object.defineProperty(holder, names.get(k) ?? k, { value, writable: true, enumerable: true, configurable: true });
  }
}

/** The text of a request that a model reads, its fields joined with "\n" (empty fields skipped). */
export function requestText(body: unknown): string {
  return collect(visitRequest, body, joined);
}

/** Rewrites every text field of a request in place with `mask`; true when something changed. */
export function maskRequest(body: unknown, mask: TextMask): Promise<boolean> {
  const c = new SlotCollector();
  visitRequest(body, c);
  return rewrite(c.slots, mask);
}

/** The text of a whole (non-streamed) answer, its fields joined with "\n" (empty fields skipped). */
export function answerText(body: unknown): string {
  return collect(visitWholeAnswer, body, joined);
}

/** Rewrites every text field of a whole answer in place with `mask`; true when something changed. */
export function maskAnswer(body: unknown, mask: TextMask): Promise<boolean> {
  const c = new SlotCollector();
  visitWholeAnswer(body, c);
  return rewrite(c.slots, mask);
}

/**
 * The text a streamed chunk adds: its fields (the answer fields above) concatenated in their
 * order without separators, so that offsets into it are what `mapChunkText` hands out. Runs on
 * every streamed event: the common chunk (one choice whose delta has only `content`) costs a few
 * property reads and no allocation.
 */
export function chunkText(chunk: unknown): string {
  if (!isObject(chunk)) return '';
  const choices = chunk.choices;
  if (Array.isArray(choices) && choices.length === 1 && chunk.error === undefined) {
    const choice = choices[0];
    if (isObject(choice) && choice.message === undefined && choice.text === undefined) {
      const d = choice.delta;
      if (isObject(d) && onlyContent(d)) return typeof d.content === 'string' ? d.content : '';
    }
  }
  return collect(visitAnswer, chunk, concatenated);
}

/** True when a delta carries no text field but (perhaps) a string `content`. */
function onlyContent(d: Json): boolean {
  const content = d.content;
  return (
    (content === undefined || content === null || typeof content === 'string') &&
    d.refusal == null &&
    d.tool_calls == null &&
    d.function_call == null &&
    d.reasoning_content == null &&
    d.reasoning == null &&
    d.name == null &&
    d.audio == null
  );
}

/** Hands each field to `fn` with its offset in the chunk's text, writing the result in its place. */
class ChunkMapper implements FieldVisitor {
  offset = 0;
  changed = false;
  constructor(private readonly fn: (text: string, offset: number) => string) {}
  field(holder: Holder, key: string | number, text: string): void {
    const out = this.fn(text, this.offset);
    if (out !== text) this.changed = true;
    (holder as Json)[key as string] = out;
    this.offset += text.length;
  }
}

/**
 * A new chunk (the input is not changed) in which each text field is replaced by
 * `fn(text, offset)`, `offset` being where that field starts in `chunkText(chunk)`. Fields are
 * handed out in `chunkText`'s order, so their texts concatenated are `chunkText(chunk)`.
 */
export function mapChunkText(
  chunk: Record<string, unknown>,
  fn: (fieldText: string, offset: number) => string,
): Record<string, unknown> {
  const copy = structuredClone(chunk);
  const mapper = new ChunkMapper(fn);
  visitAnswer(copy, mapper);
  if (mapper.changed) dropLogprobs(copy);
  return copy;
}

/**
 * A chat completion whose assistant message is `text`, as an OpenAI-compatible backend answers
 * (a sample answer: what an operator's dry run checks at egress).
 */
export function completionOf(text: string, model: string): Record<string, unknown> {
  return {
    id: 'chatcmpl-sample',
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
  };
}

/**
 * The same answer as a stream (`text/event-stream`): the text in deltas of `chunkChars`
 * characters (never cutting a surrogate pair), a final chunk and `[DONE]`.
 */
export function completionStreamOf(text: string, model: string, chunkChars = 16): string {
  const base = {
    id: 'chatcmpl-sample',
    object: 'chat.completion.chunk',
    created: Math.floor(Date.now() / 1000),
    model,
  };
  const events: string[] = [];
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    events.push(`data: ${JSON.stringify({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`);
  chunk({ role: 'assistant', content: '' }, null);
  for (let i = 0; i < text.length; ) {
    let end = Math.min(text.length, i + chunkChars);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end++;
    chunk({ content: text.slice(i, end) }, null);
    i = end;
  }
  chunk({}, 'stop');
  events.push('data: [DONE]\n\n');
  return events.join('');
}
