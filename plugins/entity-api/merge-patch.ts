/**
 * JSON Merge Patch (RFC 7396): objects merge recursively, `null` removes a field, anything else
 * (arrays included) replaces. The target is not modified.
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const base: Record<string, unknown> =
    target !== null && typeof target === 'object' && !Array.isArray(target)
      ? Object.assign(Object.create(null), target)
      : {};
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete base[key];
    // defineProperty: a key "__proto__" (valid JSON) stays a plain field, not the prototype.
    else
      Object.defineProperty(base, key, {
        value: mergePatch(base[key], value),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return base;
}
