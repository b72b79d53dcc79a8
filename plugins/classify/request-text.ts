/**
 * The text of an OpenAI-style request that safety checks look at: the content of every chat
 * message (a string, or the `text` of its text parts) and the legacy completions `prompt` (a
 * string or an array of strings), joined with newlines. Anything else in the body (model,
 * parameters, token-id prompts, images) is not text to classify and is skipped without error:
 * validating the request's shape is another stage's job.
 */

export function requestText(body: unknown): string {
  if (!isObject(body)) return '';
  const parts: string[] = [];
  if (Array.isArray(body.messages)) {
    for (const message of body.messages) {
      if (isObject(message)) contentText(message.content, parts);
    }
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') parts.push(prompt);
  else if (Array.isArray(prompt)) {
    for (const p of prompt) if (typeof p === 'string') parts.push(p);
  }
  return parts.join('\n');
}

/** A message's content: a string, or an array of parts of which the text ones count. */
function contentText(content: unknown, into: string[]): void {
  if (typeof content === 'string') {
    into.push(content);
    return;
  }
  if (!Array.isArray(content)) return;
  for (const part of content) {
    if (isObject(part) && (part.type === 'text' || part.type === 'input_text') && typeof part.text === 'string') {
      into.push(part.text);
    }
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
