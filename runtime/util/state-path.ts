/**
 * Reading a value from the request state along a dotted path from a config option
 * (`caller.attributes.policy`, `decision.action`...). The path is split once; only own
 * properties are followed, so a path can never reach into prototypes.
 */
export type StateReader = (root: unknown) => unknown;

export function compileStatePath(path: string): StateReader {
  const steps = path.split('.');
  return (root) => {
    let node = root;
    for (const step of steps) {
      if (node === null || typeof node !== 'object' || !Object.hasOwn(node, step)) return undefined;
      node = (node as Record<string, unknown>)[step];
    }
    return node;
  };
}
