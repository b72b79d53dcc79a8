import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  AIService,
  type AIServiceLogger,
  BUILTIN_DEFAULTS,
  buildTimeValues,
  CONFIG_STORAGE_KEY,
  FileStorage,
  getPresetConfigs,
  MemoryStorage,
  mergeConfig,
  REDACTED,
  redactConfig,
  validateConfig,
  webStorage,
} from '../../lib/ai-client/node.ts';

/** A service with no build-time values, on its own in-memory store unless one is given. */
function service(config = {}, options: ConstructorParameters<typeof AIService>[1] = {}) {
  return new AIService(config, { storage: new MemoryStorage(), buildTime: {}, ...options });
}

describe('presets', () => {
  it('has the five presets with the values the seed fixes', () => {
    const presets = getPresetConfigs();
    expect(Object.keys(presets)).toEqual(['hosted_a', 'hosted_b', 'hosted_c', 'local', 'hub']);
    for (const [name, preset] of Object.entries(presets)) {
      expect(preset.provider).toBe(name);
      expect(preset.temperature).toBe(0.7);
      expect(preset.maxTokens).toBe(name === 'hosted_c' ? 4000 : 2000);
      expect(() => new URL(preset.baseUrl)).not.toThrow();
      expect(preset.model).not.toBe('');
    }
    expect(presets.local.baseUrl).toBe('http://localhost:11434/v1');
  });

  it('getPresetConfigs returns copies', () => {
    const s = service();
    const presets = s.getPresetConfigs();
    presets.local.baseUrl = 'http://changed';
    expect(s.getPresetConfigs().local.baseUrl).toBe('http://localhost:11434/v1');
  });
});

describe('merge order', () => {
  it('defaults to the hosted_b preset with the built-in defaults', () => {
    const config = service().getConfig();
    const hostedB = getPresetConfigs().hosted_b;
    expect(config).toEqual({
      provider: 'hosted_b',
      apiKey: '',
      model: hostedB.model,
      baseUrl: hostedB.baseUrl,
      maxTokens: 2000,
      temperature: 0.7,
      systemPrompt: '',
    });
  });

  it('a custom provider has no preset: model and baseUrl stay empty', () => {
    const config = service({ provider: 'my-gateway' }).getConfig();
    expect(config).toMatchObject({ provider: 'my-gateway', model: '', baseUrl: '', maxTokens: 2000, temperature: 0.7 });
  });

  it('updateConfig > constructor > stored > preset > defaults, field by field', () => {
    const storage = new MemoryStorage();
    storage.setItem(
      CONFIG_STORAGE_KEY,
      JSON.stringify({ version: 1, config: { provider: 'hosted_c', model: 'stored-model', systemPrompt: 'stored' } }),
    );
    const s = service({ model: 'ctor-model', temperature: 0.3 }, { storage });
    // stored picks the provider (hosted_c: maxTokens 4000 from its preset), constructor beats stored.
    expect(s.getConfig()).toMatchObject({
      provider: 'hosted_c',
      model: 'ctor-model',
      temperature: 0.3,
      systemPrompt: 'stored',
      maxTokens: 4000,
      baseUrl: getPresetConfigs().hosted_c.baseUrl,
    });
    const updated = s.updateConfig({ temperature: 1.5, systemPrompt: 'runtime' });
    expect(updated).toMatchObject({ model: 'ctor-model', temperature: 1.5, systemPrompt: 'runtime', maxTokens: 4000 });
    // Changing the provider at run time switches the preset under every higher layer.
    expect(s.updateConfig({ provider: 'local' })).toMatchObject({
      provider: 'local',
      baseUrl: 'http://localhost:11434/v1',
      maxTokens: 2000,
      model: 'ctor-model',
    });
  });

  it('constructor provider beats the stored one, and undefined values do not erase lower layers', () => {
    const storage = new MemoryStorage();
    storage.setItem(CONFIG_STORAGE_KEY, JSON.stringify({ version: 1, config: { provider: 'hub', model: 'm' } }));
    const s = service({ provider: 'local', model: undefined }, { storage });
    expect(s.getConfig()).toMatchObject({ provider: 'local', model: 'm' });
  });

  it('build-time EXT_PROVIDER and EXT_API_KEY replace the built-in defaults only', () => {
    const s = service({}, { buildTime: { provider: 'local', apiKey: 'build-key' } });
    expect(s.getConfig()).toMatchObject({
      provider: 'local',
      apiKey: 'build-key',
      baseUrl: 'http://localhost:11434/v1',
    });
    const overridden = service(
      { provider: 'hub', apiKey: 'ctor-key' },
      { buildTime: { provider: 'local', apiKey: 'b' } },
    );
    expect(overridden.getConfig()).toMatchObject({ provider: 'hub', apiKey: 'ctor-key' });
    // Empty build-time values count as unset.
    expect(mergeConfig({ buildTime: { provider: '', apiKey: '' } }).provider).toBe('hosted_b');
  });

  it('reads the build-time variables from the environment under Node', () => {
    const saved = { key: process.env.EXT_API_KEY, provider: process.env.EXT_PROVIDER };
    try {
      process.env.EXT_API_KEY = 'env-key';
      process.env.EXT_PROVIDER = 'hub';
      expect(buildTimeValues()).toEqual({ apiKey: 'env-key', provider: 'hub' });
      expect(new AIService({}, { storage: new MemoryStorage() }).getConfig()).toMatchObject({
        provider: 'hub',
        apiKey: 'env-key',
      });
      delete process.env.EXT_API_KEY;
      delete process.env.EXT_PROVIDER;
      expect(buildTimeValues()).toEqual({ apiKey: undefined, provider: undefined });
    } finally {
      if (saved.key === undefined) delete process.env.EXT_API_KEY;
      else process.env.EXT_API_KEY = saved.key;
      if (saved.provider === undefined) delete process.env.EXT_PROVIDER;
      else process.env.EXT_PROVIDER = saved.provider;
    }
  });

  it('resetConfig forgets the stored config and the runtime updates', () => {
    const storage = new MemoryStorage();
    const s = service({ model: 'ctor' }, { storage });
    s.updateConfig({ provider: 'local', temperature: 0.1 });
    expect(storage.getItem(CONFIG_STORAGE_KEY)).not.toBeNull();
    expect(s.resetConfig()).toMatchObject({ provider: 'hosted_b', temperature: 0.7, model: 'ctor' });
    expect(storage.getItem(CONFIG_STORAGE_KEY)).toBeNull();
  });

  it('the built-in defaults are those of the seed', () => {
    expect(BUILTIN_DEFAULTS).toMatchObject({
      provider: 'hosted_b',
      apiKey: '',
      maxTokens: 2000,
      temperature: 0.7,
      systemPrompt: '',
    });
  });
});

describe('validation', () => {
  it('accepts a complete config', () => {
    expect(service({ provider: 'local' }).validate()).toEqual({ valid: true, problems: [] });
  });

  it.each([
    [{ temperature: -0.1 }, 'temperature'],
    [{ temperature: 2.01 }, 'temperature'],
    [{ temperature: '0.5' }, 'temperature'],
    [{ temperature: Number.NaN }, 'temperature'],
    [{ maxTokens: 0 }, 'maxTokens'],
    [{ maxTokens: 1.5 }, 'maxTokens'],
    [{ maxTokens: -3 }, 'maxTokens'],
    [{ baseUrl: 'not a url' }, 'baseUrl'],
    [{ baseUrl: 'ftp://example.org/v1' }, 'baseUrl'],
    [{ provider: '' }, 'provider'],
    [{ model: 42 }, 'model'],
  ])('reports %j as a problem with %s, without throwing', (input, field) => {
    const s = service({ provider: 'local', ...(input as object) });
    const result = s.validate();
    expect(result.valid).toBe(false);
    expect(result.problems.map((p) => p.field)).toContain(field);
  });

  it('accepts the limits themselves', () => {
    for (const temperature of [0, 1, 2]) expect(validateConfig({ temperature }).valid).toBe(true);
    expect(validateConfig({ maxTokens: 1 }).valid).toBe(true);
  });

  it('requires an apiKey for the hosted presets, not for local or a custom provider', () => {
    expect(service().validate().problems).toEqual([
      { field: 'apiKey', message: 'apiKey is required for provider hosted_b' },
    ]);
    expect(service({ provider: 'hub', apiKey: 'k' }).validate().valid).toBe(true);
    expect(service({ provider: 'custom', baseUrl: 'http://127.0.0.1:9/v1' }).validate().valid).toBe(true);
  });

  it('a custom provider without a baseUrl is reported', () => {
    expect(
      service({ provider: 'custom' })
        .validate()
        .problems.map((p) => p.field),
    ).toEqual(['baseUrl']);
  });

  it('updateConfig with bad values applies them and validate reports them', () => {
    const s = service({ provider: 'local' });
    expect(() => s.updateConfig({ temperature: 5 })).not.toThrow();
    expect(s.getConfig().temperature).toBe(5);
    expect(s.validate().problems).toEqual([
      { field: 'temperature', message: 'temperature must be a number between 0 and 2' },
    ]);
  });
});

describe('persistence in ext_config', () => {
  it('updateConfig persists the update; a new service on the same storage sees it', () => {
    const storage = new MemoryStorage();
    service({}, { storage }).updateConfig({ provider: 'local', temperature: 0.2, systemPrompt: 'Be brief.' });
    expect(JSON.parse(storage.getItem(CONFIG_STORAGE_KEY)!)).toEqual({
      version: 1,
      config: { provider: 'local', temperature: 0.2, systemPrompt: 'Be brief.' },
    });
    const again = service({}, { storage });
    expect(again.getConfig()).toMatchObject({ provider: 'local', temperature: 0.2, systemPrompt: 'Be brief.' });
  });

  it('the constructor config is not persisted', () => {
    const storage = new MemoryStorage();
    service({ model: 'ctor-only' }, { storage }).updateConfig({ temperature: 0.1 });
    expect(JSON.parse(storage.getItem(CONFIG_STORAGE_KEY)!).config).toEqual({ temperature: 0.1 });
  });

  it('ignores a damaged or foreign ext_config and warns', () => {
    const storage = new MemoryStorage();
    storage.setItem(CONFIG_STORAGE_KEY, '{not json');
    const warnings: string[] = [];
    const logger: AIServiceLogger = { warn: (message) => warnings.push(message) };
    expect(service({}, { storage, logger }).getConfig().provider).toBe('hosted_b');
    expect(warnings).toEqual(['ai-client stored config is not JSON; ignored']);
    storage.setItem(CONFIG_STORAGE_KEY, JSON.stringify({ version: 1, config: { provider: 'local', evil: 1 } }));
    expect(service({}, { storage }).getConfig()).not.toHaveProperty('evil');
  });

  it('keeps working when the storage refuses writes', () => {
    const storage = new MemoryStorage();
    storage.setItem = () => {
      throw new Error('QuotaExceededError');
    };
    const warnings: string[] = [];
    const s = service({}, { storage, logger: { warn: (m) => warnings.push(m) } });
    expect(s.updateConfig({ provider: 'local' }).provider).toBe('local');
    expect(warnings).toEqual(['ai-client config not persisted']);
  });
});

describe('the API key is not stored in clear', () => {
  it('is stripped from ext_config by default, yet used for the session', () => {
    const storage = new MemoryStorage();
    const s = service({}, { storage });
    s.updateConfig({ provider: 'hub', apiKey: 'sk-secret-123456' });
    expect(s.getConfig().apiKey).toBe('sk-secret-123456');
    const stored = storage.getItem(CONFIG_STORAGE_KEY)!;
    expect(stored).not.toContain('sk-secret-123456');
    expect(JSON.parse(stored).config).toEqual({ provider: 'hub' });
    // After a "reload" the key is gone unless a higher layer gives it again.
    expect(service({}, { storage }).getConfig()).toMatchObject({ provider: 'hub', apiKey: '' });
  });

  it('is persisted only with persistApiKey: true', () => {
    const storage = new MemoryStorage();
    service({}, { storage, persistApiKey: true }).updateConfig({ apiKey: 'sk-keep-me' });
    expect(JSON.parse(storage.getItem(CONFIG_STORAGE_KEY)!).config).toEqual({ apiKey: 'sk-keep-me' });
    expect(service({}, { storage }).getConfig().apiKey).toBe('sk-keep-me');
  });

  it('is never logged', () => {
    const lines: string[] = [];
    const logger: AIServiceLogger = {
      debug: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`),
      warn: (m, f) => lines.push(`${m} ${JSON.stringify(f)}`),
    };
    const s = service({}, { logger });
    s.updateConfig({ apiKey: 'sk-log-secret' });
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.join('\n')).not.toContain('sk-log-secret');
    expect(lines.join('\n')).toContain(REDACTED);
  });

  it('redactConfig hides a key and leaves an empty one visible', () => {
    expect(redactConfig({ apiKey: 'abc', model: 'm' })).toEqual({ apiKey: REDACTED, model: 'm' });
    expect(redactConfig({ apiKey: '' })).toEqual({ apiKey: '' });
  });
});

describe('storage adapters', () => {
  it('MemoryStorage keeps strings and lists keys', () => {
    const s = new MemoryStorage();
    s.setItem('a', '1');
    s.setItem('b', '2');
    s.removeItem('a');
    expect(s.getItem('a')).toBeNull();
    expect(s.getItem('b')).toBe('2');
    expect(s.keys()).toEqual(['b']);
  });

  it('FileStorage survives a new instance (a process restart), writes atomically and privately', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'aic-')), 'nested', 'store.json');
    const first = new FileStorage(path);
    expect(first.keys()).toEqual([]);
    service({}, { storage: first }).updateConfig({ provider: 'local', apiKey: 'sk-not-on-disk', maxTokens: 123 });
    first.setItem('other', 'x');
    first.removeItem('other');
    const onDisk = readFileSync(path, 'utf8');
    expect(onDisk).not.toContain('sk-not-on-disk');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const second = new FileStorage(path);
    expect(second.keys()).toEqual([CONFIG_STORAGE_KEY]);
    expect(service({}, { storage: second }).getConfig()).toMatchObject({
      provider: 'local',
      maxTokens: 123,
      apiKey: '',
    });
  });

  it('FileStorage refuses a file that is not a storage object', () => {
    const path = join(mkdtempSync(join(tmpdir(), 'aic-')), 'bad.json');
    writeFileSync(path, '[1,2]');
    expect(() => new FileStorage(path)).toThrow(/not a storage file/);
  });

  it('webStorage adapts a Web Storage object', () => {
    const items = new Map<string, string>();
    const fake = {
      get length() {
        return items.size;
      },
      key: (i: number) => [...items.keys()][i] ?? null,
      getItem: (k: string) => items.get(k) ?? null,
      setItem: (k: string, v: string) => void items.set(k, v),
      removeItem: (k: string) => void items.delete(k),
    };
    const adapter = webStorage(fake);
    service({}, { storage: adapter }).updateConfig({ provider: 'local' });
    expect(adapter.keys()).toEqual([CONFIG_STORAGE_KEY]);
    expect(service({}, { storage: adapter }).getConfig().provider).toBe('local');
  });
});

describe('module boundary', () => {
  it('imports neither the gateway runtime nor Node modules outside file-storage.ts and node.ts', () => {
    const dir = new URL('../../lib/ai-client/', import.meta.url);
    for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
      const imports = [...readFileSync(new URL(file, dir), 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]);
      for (const target of imports) {
        const allowed = target.startsWith('./') || (file === 'file-storage.ts' && target.startsWith('node:'));
        expect(allowed, `${file} imports ${target}`).toBe(true);
      }
      if (!['file-storage.ts', 'node.ts'].includes(file)) {
        expect(imports, file).not.toContain('./file-storage.ts');
        expect(imports, file).not.toContain('./node.ts');
      }
    }
  });
});
