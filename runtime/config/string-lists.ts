/**
 * Lists of the service config that may also be written as one string: a settings file's array
 * reaches its template as JSON (`["a.example"]`, see settings.ts), and an environment variable
 * as `a.example, b.example` (commas or spaces). An empty string is the empty list. Only the
 * lists named here: elsewhere a string stays a string (and the schema says if it is wrong).
 */
export const listPaths: ReadonlyArray<readonly [string, string]> = [
  ['hosts', 'allow'],
  ['hosts', 'origins'],
];

/** The list a string stands for. */
export function parseStringList(text: string): string[] {
  const t = text.trim();
  if (t.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(t);
      if (Array.isArray(parsed)) return parsed.map((v) => String(v));
    } catch {
      // not JSON: a list of words, as below (the schema then reports what is wrong in it)
    }
  }
  return t.split(/[\s,]+/).filter((s) => s !== '');
}

/** `value` (a raw service config) with the lists above given as strings made lists. */
export function listsFromStrings(value: unknown): unknown {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return value;
  let out = value as Record<string, unknown>;
  for (const [section, key] of listPaths) {
    const table = out[section];
    if (!table || typeof table !== 'object' || Array.isArray(table)) continue;
    const v = (table as Record<string, unknown>)[key];
    if (typeof v !== 'string') continue;
    out = { ...out, [section]: { ...(table as Record<string, unknown>), [key]: parseStringList(v) } };
  }
  return out;
}
