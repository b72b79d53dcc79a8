/**
 * Tool pinning: the registry records, per tool SType, the sha256 of the tool's approved
 * definition (canonical JSON of {name, description, inputSchema}). Each `tools/list` answer is
 * hashed tool by tool and compared with the pin; the last live hash per tool is kept so that a
 * later `tools/call` of a drifted tool can be refused without listing again. The pin itself is
 * read from the registry each time, so a registry reload that re-approves a tool takes effect.
 */
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import type { STypeRegistry } from '../stype-registry/api.ts';

export interface Drift {
  tool: string;
  /** Approved hash (hex). */
  pinned: string;
  /** Hash of the definition the upstream listed last (hex). */
  observed: string;
}

export function toolHash(tool: Record<string, unknown>): string {
  return sha256Hex(canonicalJson({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema }));
}

export class ToolPins {
  /** Live definition hash per tool name, from the last `tools/list` that listed it. */
  readonly #live = new Map<string, string>();

  constructor(private readonly registry: STypeRegistry) {}

  /** Hashes every listed tool and returns those whose definition differs from their pin. */
  observe(tools: unknown[]): Drift[] {
    const drifts: Drift[] = [];
    for (const tool of tools) {
      if (tool === null || typeof tool !== 'object') continue;
      const name = (tool as Record<string, unknown>).name;
      if (typeof name !== 'string') continue;
      const pinned = this.#pin(name);
      if (pinned === undefined) continue;
      const observed = toolHash(tool as Record<string, unknown>);
      this.#live.set(name, observed);
      if (observed !== pinned) drifts.push({ tool: name, pinned, observed });
    }
    return drifts;
  }

  /** Drift of a tool as last listed; undefined when it matches its pin, has none, or was never listed. */
  drift(tool: string): Drift | undefined {
    const observed = this.#live.get(tool);
    if (observed === undefined) return undefined;
    const pinned = this.#pin(tool);
    return pinned !== undefined && pinned !== observed ? { tool, pinned, observed } : undefined;
  }

  /** Number of tools whose live definition has been observed. */
  get observedCount(): number {
    return this.#live.size;
  }

  #pin(tool: string): string | undefined {
    const id = this.registry.idForTool(tool);
    const pin = id ? this.registry.get(id)?.pinned_tool_hash : undefined;
    return pin ? pin.replace(/^sha256:/i, '').toLowerCase() : undefined;
  }
}
