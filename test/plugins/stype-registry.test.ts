/**
 * The stype-registry resource on the shipped registry (configs/registry): loading, resolution,
 * validation with JSON paths, profiles, policies, search, reload, and refusal of a broken registry.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import jsonLogic from 'json-logic-js';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { STypeRegistry } from '../../plugins/stype-registry/api.ts';
import registryPlugin from '../../plugins/stype-registry/index.ts';
import { canonicalJson, sha256Hex } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';

const configs = resolve(import.meta.dirname, '../../configs');
const shipped = join(configs, 'registry');

async function load(dir = 'registry', configDir = configs) {
  return registryPlugin.create({ dir, namespace: 'everything' }, createTestEnv({ configDir }));
}

const temps: string[] = [];
function copyRegistry(): string {
  const dir = mkdtempSync(join(tmpdir(), 'registry-'));
  temps.push(dir);
  cpSync(shipped, dir, { recursive: true });
  return dir;
}
afterEach(() => {
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});

let registry: STypeRegistry;
beforeAll(async () => {
  registry = (await load()).value;
});

describe('shipped registry', () => {
  it('loads approved and pending STypes, sorted by id, with their profiles and policies', () => {
    const list = registry.list();
    expect(list.length).toBeGreaterThanOrEqual(16);
    expect(list.map((r) => r.id)).toEqual([...list.map((r) => r.id)].sort());
    expect(list.some((r) => r.status === 'approved')).toBe(true);
    expect(list.some((r) => r.status === 'pending')).toBe(true);
    expect(registry.dir).toBe(shipped);
    expect(registry.namespace).toBe('everything');
    for (const id of [
      'everything.echo',
      'everything.get-sum',
      'everything.get-env',
      'everything.get-tiny-image',
      'everything.get-structured-content',
      'everything.trigger-long-running-operation',
      'everything.get-annotated-message',
      'everything.get-resource-reference',
      'everything.resources.read',
      'mcp.tools.list',
    ]) {
      expect(registry.get(id), id).toBeDefined();
    }
  });

  it('gives each SType a 2020-12 schema whose $id is the SType id, and hash = sha256 of its canonical JSON', () => {
    for (const r of registry.list()) {
      expect(r.schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
      expect(r.schema.$id).toBe(r.id);
      for (const key of ['title', 'description', 'type', 'properties', 'required'])
        expect(r.schema, r.id).toHaveProperty(key);
      expect(r.hash).toBe(`sha256:${sha256Hex(canonicalJson(r.schema))}`);
      expect(r.version).toMatch(/^\d+\.\d+\.\d+/);
      expect(Number.isInteger(r.samples)).toBe(true);
      expect(Date.parse(r.updated_at)).toBeGreaterThanOrEqual(Date.parse(r.created_at));
      expect(`${r.namespace}.${r.name}`).toBe(r.id);
    }
    expect(registry.get('everything.echo')).toMatchObject({ namespace: 'everything', name: 'echo' });
    expect(registry.get('everything.resources.read')).toMatchObject({
      namespace: 'everything',
      name: 'resources.read',
    });
    expect(registry.get('mcp.tools.list')).toMatchObject({ namespace: 'mcp', name: 'tools.list' });
  });

  it('pins every tools/call SType to a sha256 hex tool hash', () => {
    for (const r of registry.list().filter((s) => s.match?.method === 'tools/call')) {
      expect(r.pinned_tool_hash, r.id).toMatch(/^[0-9a-f]{64}$/);
    }
  });

  it("accepts every schema's own examples", () => {
    for (const r of registry.list()) {
      for (const example of (r.schema.examples as unknown[] | undefined) ?? []) {
        expect(registry.validate(r.id, example), `${r.id} ${JSON.stringify(example)}`).toEqual({
          valid: true,
          violations: [],
        });
      }
      for (const example of (r.output_schema?.examples as unknown[] | undefined) ?? []) {
        expect(registry.validateOutput(r.id, example)?.valid, r.id).toBe(true);
      }
    }
  });

  it('declares an output schema where the tool has one (get-structured-content)', () => {
    expect(registry.get('everything.get-structured-content')?.output_schema).toBeDefined();
    expect(registry.outputValidator('everything.get-structured-content')).toBeTypeOf('function');
    expect(registry.outputValidator('everything.echo')).toBeUndefined();
    const bad = registry.validateOutput(
      'everything.get-structured-content',
      { temperature: 'hot', humidity: 82 },
      '$.result.structuredContent',
    );
    expect(bad?.valid).toBe(false);
    expect(bad?.violations).toEqual(
      expect.arrayContaining([
        { path: '$.result.structuredContent.temperature', message: 'must be number' },
        { path: '$.result.structuredContent.conditions', message: 'is required' },
      ]),
    );
  });

  it('has QoM profiles over the six named dimensions with thresholds in [0, 1]', () => {
    const dims = ['completeness', 'consistency', 'specificity', 'schema_conform', 'safety', 'relevance'];
    const profiles = registry.profiles();
    expect(profiles.map((p) => p.name)).toContain('default');
    for (const p of profiles) {
      expect(p.threshold).toBeGreaterThanOrEqual(0);
      expect(p.threshold).toBeLessThanOrEqual(1);
      expect(p.dimensions.length).toBeGreaterThan(0);
      for (const d of p.dimensions) expect(dims).toContain(d);
      expect(p.description.length).toBeGreaterThan(0);
    }
    expect(registry.profile('strict')?.weights).toEqual({ schema_conform: 2, safety: 2 });
    expect(registry.profile('nope')).toBeUndefined();
    for (const r of registry.list())
      for (const name of r.qom_profiles) expect(registry.profile(name), name).toBeDefined();
  });

  it('ships policies whose rules deny get-env, and only get-env among the plain tool calls', () => {
    expect(
      registry
        .policies()
        .map((p) => p.name)
        .sort(),
    ).toEqual(['default', 'deny-env-disclosure', 'tool-poisoning', 'tool-result-injection', 'tool-scopes']);
    type Rule = { id: string; phase: string; when: jsonLogic.RulesLogic; action: string; detail: string };
    const rules = registry.policies().flatMap((p) => (p.rules as Rule[]).map((r) => ({ ...r, policy: p.name })));
    const denied = (data: Record<string, unknown>) =>
      rules.filter((r) => r.action === 'deny' && jsonLogic.apply(r.when, data)).map((r) => `${r.policy}/${r.id}`);
    const call = (tool: string, args: Record<string, unknown> = {}) => {
      const stype = registry.resolve('tools/call', { name: tool });
      return {
        method: 'tools/call',
        tool,
        arguments: args,
        stype: stype?.id,
        stype_status: stype?.status,
        mode: 'strict',
      };
    };
    expect(denied(call('get-env'))).toEqual(['deny-env-disclosure/deny-get-env']);
    expect(registry.get('everything.get-env')?.policies).toContain('deny-env-disclosure');
    for (const tool of ['echo', 'get-sum', 'get-tiny-image', 'get-structured-content', 'get-annotated-message']) {
      expect(denied(call(tool, { message: 'hi' })), tool).toEqual([]);
    }
    expect(denied(call('trigger-long-running-operation', { duration: 5, steps: 5 }))).toEqual([]);
    expect(denied(call('trigger-long-running-operation', { duration: 3600 }))).toEqual([
      'default/cap-long-running-duration',
    ]);
    // Tool calls are decided at ingress; tool definitions (phase tools) and results (egress) apart.
    const phases: Record<string, string> = { 'tool-poisoning': 'tools', 'tool-result-injection': 'egress' };
    for (const r of rules) expect(r.phase).toBe(phases[r.policy] ?? 'ingress');
    for (const r of registry.list()) for (const name of r.policies) expect(registry.policy(name), name).toBeDefined();
  });

  it('returns frozen records, so no stage can change the registry for the others', () => {
    const echo = registry.get('everything.echo')!;
    expect(Object.isFrozen(echo)).toBe(true);
    expect(Object.isFrozen(echo.schema)).toBe(true);
    expect(() => {
      (echo as { version: string }).version = '9.9.9';
    }).toThrow();
  });
});

describe('resolve', () => {
  it('maps tools/call by tool name under the namespace, and other methods by method', () => {
    expect(registry.resolve('tools/call', { name: 'echo', arguments: { message: 'x' } })?.id).toBe('everything.echo');
    expect(registry.resolve('tools/call', { name: 'get-env' })?.status).toBe('pending');
    expect(registry.resolve('resources/read', { uri: 'demo://resource/dynamic/text/1' })?.id).toBe(
      'everything.resources.read',
    );
    expect(registry.resolve('tools/list', {})?.id).toBe('mcp.tools.list');
    expect(registry.resolve('tools/list', undefined)?.id).toBe('mcp.tools.list');
    expect(registry.idForTool('echo')).toBe('everything.echo');
    expect(registry.idForTool('get-sum')).toBe('everything.get-sum');
  });

  it('resolves nothing for unknown tools and methods or a tools/call without a name', () => {
    expect(registry.resolve('tools/call', { name: 'no-such-tool' })).toBeUndefined();
    expect(registry.resolve('tools/call', {})).toBeUndefined();
    expect(registry.resolve('tools/call', [])).toBeUndefined();
    expect(registry.resolve('tools/call', null)).toBeUndefined();
    expect(registry.resolve('tools/call', { name: 42 })).toBeUndefined();
    expect(registry.resolve('sampling/createMessage', {})).toBeUndefined();
    expect(registry.idForTool('no-such-tool')).toBeUndefined();
  });
});

describe('validate', () => {
  it('accepts a conforming payload and reports every violation with a JSON path', () => {
    expect(registry.validate('everything.echo', { message: 'hi' })).toEqual({ valid: true, violations: [] });
    expect(registry.validate('everything.get-sum', { a: 'one' }, '$.arguments')).toEqual({
      valid: false,
      violations: expect.arrayContaining([
        { path: '$.arguments.a', message: 'must be number' },
        { path: '$.arguments.b', message: 'is required' },
      ]),
    });
    expect(registry.validate('everything.echo', { message: 'x', extra: 1 })?.violations).toEqual([
      { path: '$.extra', message: 'is not allowed' },
    ]);
    expect(registry.validate('everything.get-annotated-message', { messageType: 'warning' })?.violations).toEqual([
      { path: '$.messageType', message: 'must be one of "error", "success", "debug"' },
    ]);
  });

  it('renders nested keys, odd keys and array indexes as JSON paths', () => {
    const v = registry.validate('everything.prompts.get', { name: 'args-prompt', arguments: { city: 7, 'my key': 1 } });
    expect(v?.violations).toEqual(
      expect.arrayContaining([
        { path: '$.arguments.city', message: 'must be string' },
        { path: '$.arguments["my key"]', message: 'must be string' },
      ]),
    );
    const init = registry.validate('mcp.initialize', {
      protocolVersion: '2025-06-18',
      capabilities: {},
      clientInfo: { name: 'x' },
    });
    expect(init?.violations).toEqual([{ path: '$.clientInfo.version', message: 'is required' }]);
  });

  it('is undefined for an unknown SType', () => {
    expect(registry.validate('nope.nothing', {})).toBeUndefined();
    expect(registry.validator('nope.nothing')).toBeUndefined();
  });

  it('uses validators compiled once at load', () => {
    expect(registry.validator('everything.echo')).toBe(registry.validator('everything.echo'));
  });
});

describe('search', () => {
  it('finds an SType by name with a perfect score and field snippets', () => {
    const res = registry.search('echo');
    expect(res.query).toBe('echo');
    expect(res.total).toBe(res.results.length);
    expect(res.results[0].stype).toBe('everything.echo');
    expect(res.results[0].score).toBe(1);
    expect(res.results[0].matches).toEqual(
      expect.arrayContaining([
        { field: 'stype', snippet: 'everything.echo' },
        expect.objectContaining({ field: 'description' }),
      ]),
    );
  });

  it('is case-insensitive and covers schema content (property names, descriptions, enum values)', () => {
    const byProperty = registry.search('HUMIDITY');
    expect(byProperty.results[0].stype).toBe('everything.get-structured-content');
    expect(byProperty.results[0].matches.map((m) => m.field)).toContain('output_schema.properties.humidity');
    const byEnum = registry.search('chicago');
    expect(byEnum.results.map((r) => r.stype)).toEqual(['everything.get-structured-content']);
    expect(byEnum.results[0].matches[0].field).toBe('schema.properties.location.enum');
    const byPropName = registry.search('messageType');
    expect(byPropName.results[0].stype).toBe('everything.get-annotated-message');
  });

  it('ranks multi-word queries by the number of terms matched, scores normalised to [0, 1]', () => {
    const res = registry.search('weather humidity zzzunknown');
    expect(res.results[0].stype).toBe('everything.get-structured-content');
    for (const r of res.results) {
      expect(r.score).toBeGreaterThan(0);
      expect(r.score).toBeLessThanOrEqual(1);
    }
    const both = registry.search('resource links');
    const one = both.results.find((r) => r.stype === 'everything.get-resource-links')!;
    const other = both.results.find((r) => r.stype === 'everything.get-tiny-image');
    expect(both.results[0].stype).toBe('everything.get-resource-links');
    expect(other === undefined || other.score < one.score).toBe(true);
    const scores = both.results.map((r) => r.score);
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
  });

  it('cuts snippets to about 60 characters around the hit', () => {
    for (const r of registry.search('environment').results) {
      for (const m of r.matches) expect(m.snippet.length).toBeLessThanOrEqual(62);
    }
    const long = registry.search('forgery');
    expect(long.total).toBe(0);
    const desc = registry.search('verbatim').results[0].matches.find((m) => m.field === 'description')!;
    expect(desc.snippet.toLowerCase()).toContain('verbatim');
    expect(desc.snippet.length).toBeLessThanOrEqual(62);
  });

  it('returns nothing for an unmatched query', () => {
    expect(registry.search('qwertyuiop')).toEqual({ query: 'qwertyuiop', results: [], total: 0 });
  });
});

describe('loading problems', () => {
  it('refuses a broken registry and names every bad file with its field', async () => {
    const dir = copyRegistry();
    const edit = (file: string, from: string | RegExp, to: string) => {
      const path = join(dir, file);
      const text = readFileSync(path, 'utf8');
      const next = text.replace(from, to);
      expect(next, `${file}: edit did not apply`).not.toBe(text);
      writeFileSync(path, next);
    };
    edit('stypes/everything.echo.yaml', /^version: .*$/m, 'version: one');
    edit('stypes/everything.get-sum.yaml', /^description: .*$/m, '');
    edit('stypes/everything.get-env.yaml', '$id: everything.get-env', '$id: everything.other');
    edit('stypes/everything.get-tiny-image.yaml', /qom_profiles:\n {2}- default/, 'qom_profiles:\n  - no-such-profile');
    edit('stypes/mcp.tools.list.yaml', 'method: tools/list', 'method: resources/read');
    writeFileSync(join(dir, 'stypes/everything.broken.yaml'), 'id: everything.broken\nstatus: [unclosed\n');
    writeFileSync(join(dir, 'README.md'), 'not data');

    const err = (await load(dir).then(
      () => undefined,
      (e: Error) => e,
    )) as Error;
    expect(err).toBeInstanceOf(Error);
    const msg = err.message;
    expect(msg).toMatch(/everything\.echo\.yaml: version: must match pattern/);
    expect(msg).toMatch(/everything\.get-sum\.yaml: description: is required/);
    expect(msg).toMatch(/everything\.get-env\.yaml: schema\.\$id: must equal the SType id "everything\.get-env"/);
    expect(msg).toMatch(/everything\.get-tiny-image\.yaml: qom_profiles\[0\]: unknown profile "no-such-profile"/);
    expect(msg).toMatch(/mcp\.tools\.list\.yaml: match: same as everything\.resources\.read/);
    expect(msg).toMatch(/everything\.broken\.yaml: line \d+, column \d+: /);
    expect(msg).toMatch(/has 6 problems/);
  });

  it('rejects a file whose name differs from its id, and an invalid JSON Schema', async () => {
    const dir = copyRegistry();
    const echo = readFileSync(join(dir, 'stypes/everything.echo.yaml'), 'utf8');
    writeFileSync(join(dir, 'stypes/everything.echo2.yaml'), echo.replace(/^match:\n.*\n.*\n/m, ''));
    writeFileSync(
      join(dir, 'stypes/everything.get-sum.yaml'),
      readFileSync(join(dir, 'stypes/everything.get-sum.yaml'), 'utf8').replace('type: number', 'type: numbr'),
    );
    await expect(load(dir)).rejects.toThrow(
      /everything\.echo2\.yaml: id: must equal the file name "everything\.echo2"/,
    );
    await expect(load(dir)).rejects.toThrow(/everything\.get-sum\.yaml: schema: is not a valid JSON Schema/);
  });

  it('reports a broken profiles file once, not again for every SType that names a profile', async () => {
    const dir = copyRegistry();
    const file = join(dir, 'profiles.yaml');
    writeFileSync(file, readFileSync(file, 'utf8').replace('threshold: 0.6', 'threshold: 1.6'));
    await expect(load(dir)).rejects.toThrow(
      /has 1 problem:\n {2}- .*profiles\.yaml: profiles\[0\]\.threshold: must be <= 1$/,
    );
  });

  it('fails clearly when the directory does not exist', async () => {
    await expect(load('/nonexistent/registry')).rejects.toThrow(
      /SType registry directory not found: \/nonexistent\/registry/,
    );
  });
});

describe('reload', () => {
  it('swaps in the changed registry for every holder, and keeps the old one when the new one is broken', async () => {
    const dir = copyRegistry();
    const instance = await load(dir);
    const reg = instance.value;
    const file = join(dir, 'stypes/everything.echo.yaml');
    const original = readFileSync(file, 'utf8');
    expect(reg.get('everything.echo')?.version).toBe('1.2.0');

    writeFileSync(file, original.replace('version: 1.2.0', 'version: 1.3.0'));
    await instance.reload?.();
    expect(reg.get('everything.echo')?.version).toBe('1.3.0');
    expect(reg.resolve('tools/call', { name: 'echo' })?.version).toBe('1.3.0');

    writeFileSync(file, original.replace('version: 1.2.0', 'version: latest'));
    await expect(instance.reload?.()).rejects.toThrow(/everything\.echo\.yaml: version/);
    expect(reg.get('everything.echo')?.version).toBe('1.3.0');
    expect(await instance.health?.()).toMatchObject({ ok: true, status: 'loaded' });
  });
});
