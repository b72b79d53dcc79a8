import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
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
