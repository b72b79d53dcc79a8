/**
 * The shipped registry against the real MCP reference server (spawned over stdio): every pinned
 * tool hash matches the live tool definition, and each tool SType's schema has the tool's
 * argument names. When the reference server is upgraded and a tool changes, this fails: review
 * the change, then run `npx tsx plugins/stype-registry/pin-tools.ts --write`.
 */
import { resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { STypeRegistry } from '../../plugins/stype-registry/api.ts';
import registryPlugin from '../../plugins/stype-registry/index.ts';
import { comparePins, listStdioTools, type ToolDefinition, toolHash } from '../../plugins/stype-registry/pin-tools.ts';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const dir = resolve(import.meta.dirname, '../../configs/registry');
let tools: ToolDefinition[];
let registry: STypeRegistry;

beforeAll(async () => {
  tools = await listStdioTools();
  registry = (await registryPlugin.create({ dir, namespace: 'everything' }, createTestEnv())).value;
});

describe('tool pins of the shipped registry', () => {
  it('hashes a tool as sha256 of the canonical JSON of {name, description, inputSchema}', () => {
    const echo = tools.find((t) => t.name === 'echo')!;
    expect(toolHash(echo)).toBe(
      sha256Hex(canonicalJson({ name: 'echo', description: echo.description, inputSchema: echo.inputSchema })),
    );
    // Other fields of the definition (title, annotations...) are not part of the pin.
    expect(toolHash({ ...echo, title: 'Changed title' })).toBe(toolHash(echo));
    expect(toolHash({ ...echo, description: 'Changed' })).not.toBe(toolHash(echo));
  });

  it('matches the live definition of every registered tool', async () => {
    const report = await comparePins(dir, tools);
    const registered = report.filter((r) => r.status !== 'unregistered');
    expect(registered.length).toBeGreaterThanOrEqual(12);
    expect(registered.filter((r) => r.status !== 'ok')).toEqual([]);
    for (const r of registered) expect(registry.get(r.stype!)?.pinned_tool_hash).toBe(r.live);
  });

  it('registers the main tools, with the same argument names as the live tool', () => {
    for (const name of [
      'echo',
      'get-sum',
      'get-env',
      'get-tiny-image',
      'get-structured-content',
      'get-annotated-message',
    ]) {
      expect(tools.map((t) => t.name)).toContain(name);
    }
    for (const tool of tools) {
      const stype = registry.resolve('tools/call', { name: tool.name });
      if (!stype) continue;
      const live = tool.inputSchema as { properties?: Record<string, unknown>; required?: string[] };
      const ours = stype.schema as { properties: Record<string, unknown>; required: string[] };
      expect(Object.keys(ours.properties).sort(), tool.name).toEqual(Object.keys(live.properties ?? {}).sort());
      for (const req of live.required ?? []) expect(ours.required, `${tool.name}.${req}`).toContain(req);
      expect(Boolean(stype.output_schema), `${tool.name} output schema`).toBe(Boolean(tool.outputSchema));
    }
  });
});
