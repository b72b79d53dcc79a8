/**
 * The text fields of OpenAI-style bodies that policies inspect and redaction rewrites: chat
 * `messages[].content` (a string or text parts) and legacy `prompt` in requests; `choices[]`
 * `message.content` / `text` in answers, and `delta.content` / `text` in streamed chunks.
 * Other fields are left alone.
 */
type Mask = (text: string) => Promise<string>;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Rewrites every text field of a request with `mask`; true when something changed. */
export async function maskRequest(body: unknown, mask: Mask): Promise<boolean> {
  if (!isObject(body)) return false;
  let changed = false;
  const apply = async (text: string): Promise<string> => {
    const out = await mask(text);
    if (out !== text) changed = true;
    return out;
  };
  if (Array.isArray(body.messages)) {
    for (const message of body.messages) {
      if (!isObject(message)) continue;
      if (typeof message.content === 'string') message.content = await apply(message.content);
      else if (Array.isArray(message.content)) {
        for (const part of message.content) {
          if (isObject(part) && typeof part.text === 'string') part.text = await apply(part.text);
        }
      }
    }
  }
  if (typeof body.prompt === 'string') body.prompt = await apply(body.prompt);
  else if (Array.isArray(body.prompt)) {
    for (let i = 0; i < body.prompt.length; i++) {
      const p = body.prompt[i];
      if (typeof p === 'string') body.prompt[i] = await apply(p);
    }
  }
  return changed;
}

/** The answer text of a chat or completions response (all choices, joined with newlines). */
export function responseText(body: unknown): string {
  if (!isObject(body) || !Array.isArray(body.choices)) return '';
  const parts: string[] = [];
  for (const choice of body.choices) {
    if (!isObject(choice)) continue;
    if (isObject(choice.message) && typeof choice.message.content === 'string') parts.push(choice.message.content);
    if (typeof choice.text === 'string') parts.push(choice.text);
  }
  return parts.join('\n');
}

/** Rewrites the answer text of each choice with `mask`; true when something changed. */
export async function maskResponse(body: unknown, mask: Mask): Promise<boolean> {
  if (!isObject(body) || !Array.isArray(body.choices)) return false;
  let changed = false;
  for (const choice of body.choices) {
    if (!isObject(choice)) continue;
    if (isObject(choice.message) && typeof choice.message.content === 'string') {
      const out = await mask(choice.message.content);
      if (out !== choice.message.content) changed = true;
      choice.message.content = out;
    }
    if (typeof choice.text === 'string') {
      const out = await mask(choice.text);
      if (out !== choice.text) changed = true;
      choice.text = out;
    }
  }
  return changed;
}

/** The text a streamed chunk adds (`choices[].delta.content`, or `choices[].text` for completions). */
export function chunkText(chunk: unknown): string {
  if (!isObject(chunk) || !Array.isArray(chunk.choices)) return '';
  let text = '';
  for (const choice of chunk.choices) {
    if (!isObject(choice)) continue;
    if (isObject(choice.delta) && typeof choice.delta.content === 'string') text += choice.delta.content;
    if (typeof choice.text === 'string') text += choice.text;
  }
  return text;
}
