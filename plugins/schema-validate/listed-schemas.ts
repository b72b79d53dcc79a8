/**
 * The schemas of the tools an upstream lists, checked at pin time (each `tools/list` answer, where
 * pins are compared): a tool whose `inputSchema` or `outputSchema` is refused by schema-inspect.ts
 * (an unsupported dialect, a `$ref` out of the document, nesting, size or subschemas over the
 * bounds, a pattern without a linear-time match, a cost over the budget) is reported with the
 * reason, and remembered so that a call naming it is refused until a listing shows it sound. Its
 * schemas are never compiled, and nothing they reference is fetched.
 */
import { boundedSize, inspectSchema, type SchemaLimits } from './schema-inspect.ts';

export interface RefusedTool {
  tool: string;
  reason: string;
}

/** Tools remembered as refused at most (a listing is of one upstream; the oldest are forgotten first). */
const maxRemembered = 10_000;

/** Schema text inspected between two turns of the event loop: a listing of megabytes holds no request long. */
const sliceBytes = 256 * 1024;

export class ListedSchemas {
  readonly #refused = new Map<string, string>();

  constructor(private readonly limits: SchemaLimits) {}

  /** Inspects the schemas of every listed tool, in slices; the refused ones, with their reason. */
  async observe(tools: unknown[]): Promise<RefusedTool[]> {
    const out: RefusedTool[] = [];
    let inspected = 0;
    for (const tool of tools) {
      if (tool === null || typeof tool !== 'object') continue;
      const { name, inputSchema, outputSchema } = tool as Record<string, unknown>;
      if (typeof name !== 'string') continue;
      inspected +=
        boundedSize(inputSchema, this.limits.max_schema_bytes) +
        boundedSize(outputSchema, this.limits.max_schema_bytes);
      if (inspected > sliceBytes) {
        inspected = 0;
        await new Promise((r) => setImmediate(r));
      }
      const reason = this.#reason(inputSchema, outputSchema);
      this.#refused.delete(name);
      if (reason === undefined) continue;
      out.push({ tool: name, reason });
      if (this.#refused.size >= maxRemembered) this.#refused.delete(this.#refused.keys().next().value as string);
      this.#refused.set(name, reason);
    }
    return out;
  }

  /** Why the tool's schemas were refused when it was last listed; undefined when they were not. */
  refused(tool: string): string | undefined {
    return this.#refused.get(tool);
  }

  #reason(inputSchema: unknown, outputSchema: unknown): string | undefined {
    // A missing inputSchema is the protocol check's to report (mcp-validate), not a schema bound.
    for (const [field, schema] of [
      ['inputSchema', inputSchema],
      ['outputSchema', outputSchema],
    ] as const) {
      if (schema === undefined) continue;
      const inspection = inspectSchema(schema, this.limits);
      if (!inspection.ok) return `${field}: ${inspection.reason}`;
    }
    return undefined;
  }
}
