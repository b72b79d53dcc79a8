import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger, flushLogger } from '../../runtime/observability/logger.ts';
import { ServiceRuntime } from '../../runtime/service/runtime.ts';

const basic = join(import.meta.dirname, '../fixtures/basic.yaml');

/** Keys that occur twice in one object of a JSON text (JSON.parse would keep only the last). */
function duplicateKeys(json: string): string[] {
  const duplicates: string[] = [];
  const objects: Array<Set<string> | null> = []; // null for an array
  let expectKey = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (c === '"') {
      const end = closingQuote(json, i);
      const top = objects.at(-1);
      if (expectKey && top) {
        const key = JSON.parse(json.slice(i, end + 1)) as string;
        if (top.has(key)) duplicates.push(key);
        top.add(key);
      }
      expectKey = false;
      i = end;
    } else if (c === '{') {
      objects.push(new Set());
      expectKey = true;
    } else if (c === '[') {
      objects.push(null);
    } else if (c === '}' || c === ']') {
      objects.pop();
    } else if (c === ',') {
      expectKey = objects.at(-1) instanceof Set;
    }
  }
  return duplicates;
}

function closingQuote(text: string, open: number): number {
  for (let i = open + 1; i < text.length; i++) {
    if (text[i] === '\\') i++;
    else if (text[i] === '"') return i;
  }
  throw new Error('unterminated string');
}

async function logLines(file: string, last: string): Promise<string[]> {
  for (let waited = 0; waited < 3000; waited += 20) {
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    if (text.includes(last)) return text.trim().split('\n');
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no "${last}" in ${file}`);
}

describe('JSON logs', () => {
  it('the scanner finds what JSON.parse hides', () => {
    expect(duplicateKeys('{"a":1,"b":{"a":2,"c":[{"a":3}]},"d":"\\"a\\","}')).toEqual([]);
    expect(duplicateKeys('{"service":"x","service":"x","n":{"k":1,"k":2}}')).toEqual(['service', 'k']);
  });

  it('every line of a running service carries each key once', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'sy-logs-')), 'service.log');
    const runtime = await ServiceRuntime.start(basic, {
      set: ['listen.port=0', 'metrics.port=0', 'admin.port=0', `logging.file=${file}`, 'logging.format=json'],
    });
    const url = `http://127.0.0.1:${runtime.info.ports.main}`;
    for (const path of ['/echo', '/fail-closed', '/fail-open', '/deny', '/nope']) await fetch(`${url}${path}`);
    await runtime.close();

    const lines = await logLines(file, 'service stopped');
    // started, 5 access lines, 2 stage failures, 1 internal error, stopped
    expect(lines.length).toBeGreaterThanOrEqual(10);
    for (const line of lines) {
      expect(duplicateKeys(line), line).toEqual([]);
      expect(JSON.parse(line).service).toBe('basic');
    }
  });
});

const tempDir = () => mkdtempSync(join(tmpdir(), 'sy-logs-'));
const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe('JSON log records', () => {
  it('carry timestamp (ISO 8601), level as a word, target, message and the fields', async () => {
    const file = join(tempDir(), 'records.log');
    const logger = createLogger({ file, format: 'json', level: 'trace' }, { service: 'db' });
    logger.trace('tracing');
    logger.debug({ entity: 'user' }, 'debugging');
    logger.child({ stage: 'GET /users/:id:entity-api.2', route: 'GET /users/:id' }).warn({ duration_ms: 3.5 }, 'slow');
    logger.child({ resource: 'store' }).error('disk full');
    logger.child({ upstream: 'llm' }).info('connected');
    logger.child({ target: 'slow_query' }).info({ entity: 'user', rows_returned: 2, request_id: 'r1' }, 'slow query');
    logger.info({ target: 'explicit' }, 'own target');
    await flushLogger(logger);

    const lines = readFileSync(file, 'utf8').trim().split('\n');
    for (const line of lines) expect(duplicateKeys(line), line).toEqual([]);
    const records = lines.map((l) => JSON.parse(l));
    for (const r of records) {
      expect(r.timestamp).toMatch(isoTimestamp);
      expect(r).not.toHaveProperty('time');
      expect(r).not.toHaveProperty('msg');
      expect(r.service).toBe('db');
    }
    expect(records.map((r) => [r.level, r.target, r.message])).toEqual([
      ['trace', 'runtime', 'tracing'],
      ['debug', 'runtime', 'debugging'],
      ['warn', 'entity-api', 'slow'],
      ['error', 'resource:store', 'disk full'],
      ['info', 'upstream:llm', 'connected'],
      ['info', 'slow_query', 'slow query'],
      ['info', 'explicit', 'own target'],
    ]);
    expect(records[1].entity).toBe('user');
    expect(records[2].duration_ms).toBe(3.5);
    expect(records[5]).toMatchObject({ entity: 'user', rows_returned: 2, request_id: 'r1' });
  });

  it('a service writes runtime and http records, its file relative to the config', async () => {
    const dir = tempDir();
    const config = join(dir, 'service.yaml');
    writeFileSync(
      config,
      `service: logs
listen: { port: 0 }
logging: { file: logs/service.log, format: json }
routes:
  - match: { method: GET, path: /ok }
    pipeline: [{ respond: { body: { ok: true } } }]
`,
    );
    const runtime = await ServiceRuntime.start(config);
    await fetch(`${runtime.info.mainUrl}/ok`, { headers: { 'x-request-id': 'req-42' } });
    await runtime.close();
    const records = readFileSync(join(dir, 'logs/service.log'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(records[0]).toMatchObject({ level: 'info', target: 'runtime', message: 'service logs started' });
    expect(records.find((r) => r.request_id === 'req-42')).toMatchObject({
      level: 'info',
      target: 'http',
      message: 'request',
      status: 200,
    });
    expect(records.at(-1)).toMatchObject({ target: 'runtime', message: 'service stopped' });
  });
});

describe('log rotation', () => {
  const line = 'x'.repeat(200);

  it('rotates at max_size_mb and keeps at most max_files old files', async () => {
    const dir = tempDir();
    const file = join(dir, 'rotating.log');
    // 10 KiB a file; about 60 KiB written.
    const logger = createLogger({ file, format: 'json', max_size_mb: 10 / 1024, max_files: 2 }, { service: 'db' });
    for (let i = 0; i < 250; i++) logger.info({ i }, line);
    await flushLogger(logger);
    await new Promise((r) => setTimeout(r, 100)); // the last rotation job

    expect(readdirSync(dir).sort()).toEqual(['rotating.log', 'rotating.log.1', 'rotating.log.2']);
    for (const name of readdirSync(dir)) expect(statSync(join(dir, name)).size).toBeLessThan(10 * 1024 + 400);
    const numbers = (name: string) =>
      readFileSync(join(dir, name), 'utf8')
        .trim()
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l).i as number);
    // Newest in the current file, then .1, then .2; older lines are gone; nothing lost in between.
    const current = numbers('rotating.log');
    const first = numbers('rotating.log.1');
    const second = numbers('rotating.log.2');
    expect(current.at(-1)).toBe(249);
    expect(first.at(-1)).toBe((current[0] ?? 0) - 1);
    expect(second.at(-1)).toBe((first[0] ?? 0) - 1);
    expect(second[0]).toBeGreaterThan(0);
  });

  it('rotates pretty and compact output too', async () => {
    const dir = tempDir();
    const file = join(dir, 'compact.log');
    const logger = createLogger({ file, format: 'compact', max_size_mb: 4 / 1024, max_files: 1 }, { service: 'db' });
    for (let i = 0; i < 60; i++) logger.info({ i }, line);
    await flushLogger(logger);
    await new Promise((r) => setTimeout(r, 100));
    expect(readdirSync(dir).sort()).toEqual(['compact.log', 'compact.log.1']);
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('INFO');
    expect(text).toContain(line);
    expect(text.trim().split('\n').length).toBeGreaterThan(1);
    expect(() => JSON.parse(text.split('\n')[0] ?? '')).toThrow();
  });

  it('refuses to start when the log file cannot be opened', () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'not-a-dir'), '');
    expect(() => createLogger({ file: join(dir, 'not-a-dir', 'x.log') })).toThrow(/cannot open log file/);
  });
});

describe('log formats for people and for collectors', () => {
  const request = { request_id: 'r1', method: 'POST', path: '/v1/chat', route: 'chat', status: 200, duration_ms: 3.25 };

  async function written(format: 'pretty' | 'compact' | 'auto' | 'json'): Promise<string[]> {
    const file = join(mkdtempSync(join(tmpdir(), 'switchyard-fmt-')), 'out.log');
    const logger = createLogger({ file, format }, { service: 'safety-filter' });
    logger.child({ target: 'http' }).info(request, 'request');
    logger.child({ target: 'runtime' }).info({ ports: { main: 8080 } }, 'service started');
    await flushLogger(logger);
    await new Promise((r) => setTimeout(r, 50));
    return readFileSync(file, 'utf8').trimEnd().split('\n');
  }

  it('pretty and compact: one line a record, the service named on each', async () => {
    for (const format of ['pretty', 'compact'] as const) {
      const lines = await written(format);
      expect(lines, format).toHaveLength(2);
      for (const line of lines) expect(line, format).toMatch(/INFO: safety-filter (http|runtime): /);
    }
  });

  it('compact spells a request as METHOD path status duration', async () => {
    const [line] = await written('compact');
    expect(line).toMatch(/INFO: safety-filter http: request POST \/v1\/chat 200 3\.25ms$/);
  });

  it('auto is json where no person reads (a file, a pipe)', async () => {
    const [line] = await written('auto');
    expect(JSON.parse(line ?? '')).toMatchObject({ service: 'safety-filter', target: 'http', message: 'request' });
  });
});

describe('LOG_LEVEL and LOG_FORMAT', () => {
  it('win over every service config, the datastore settings file included', async () => {
    const { loggingOptions } = await import('../../runtime/service/runtime.ts');
    const { loadService } = await import('../../runtime/config/load.ts');
    for (const file of ['configs/datastore.toml', 'configs/ranking.yaml']) {
      const { config, configDir } = await loadService(file, { env: {} });
      expect(
        loggingOptions(config.logging, configDir, undefined, { LOG_FORMAT: 'compact', LOG_LEVEL: 'debug' }),
        file,
      ).toMatchObject({
        format: 'compact',
        level: 'debug',
      });
      expect(loggingOptions(config.logging, configDir, undefined, {}), file).toMatchObject({
        format: 'auto',
        level: 'info',
      });
    }
  });

  it('a value that is not a choice stops the start, naming the variable', async () => {
    const { loggingOptions } = await import('../../runtime/service/runtime.ts');
    const logging = { level: 'info', format: 'auto' as const, max_size_mb: 0, max_files: 5, access_log: true };
    expect(() => loggingOptions(logging, '.', undefined, { LOG_FORMAT: 'jsn' })).toThrow(
      /LOG_FORMAT must be one of auto, json, pretty, compact, not "jsn"/,
    );
    expect(() => loggingOptions(logging, '.', undefined, { LOG_LEVEL: 'verbose' })).toThrow(/LOG_LEVEL must be one of/);
  });
});
