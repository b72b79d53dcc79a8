/**
 * schemas/service.schema.json as yaml-language-server uses it: on the raw file, before `${VAR}`
 * interpolation and before `<<` merge keys are applied. Every shipped config must be clean there
 * (a false error teaches operators to ignore the red lines), and real mistakes must still show.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = join(import.meta.dirname, '../..');
const ajv = new Ajv2020({ allErrors: true, strict: false });
addFormats.default(ajv);
const validate = ajv.compile(JSON.parse(readFileSync(join(root, 'schemas/service.schema.json'), 'utf8')));

/** What an editor reports for the raw text: error paths. */
function editorErrors(text: string): string[] {
  validate(parse(text, { merge: false }));
  return (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

const shipped = [
  ...readdirSync(join(root, 'configs'))
    .filter((f) => f.endsWith('.yaml'))
    .map((f) => join('configs', f)),
  'configs/datastore/service.yaml',
];

describe('the editor schema on the raw config files', () => {
  it('finds nothing wrong in any shipped config (variables, merge keys and all)', () => {
    expect(shipped.length).toBeGreaterThanOrEqual(7);
    for (const file of shipped) {
      const text = readFileSync(join(root, file), 'utf8');
      expect(text, file).toMatch(/^# yaml-language-server: \$schema=/);
      expect(editorErrors(text), file).toEqual([]);
    }
  });

  it('still shows a misspelt key, a wrong type and a wrong choice written literally', () => {
    const base = 'service: demo\nlisten: { port: 8080 }\nroutes: []\n';
    expect(editorErrors(base)).toEqual([]);
    expect(editorErrors(`${base}limits: { max_concurent: 8 }\n`).join('\n')).toMatch(
      /must NOT have additional properties/,
    );
    expect(editorErrors(base.replace('8080', '"eighty"')).join('\n')).toMatch(/\/listen\/port/);
    expect(editorErrors(`${base}mode: strikt\n`).join('\n')).toMatch(/\/mode/);
    // A variable stands for any value until it is known.
    expect(editorErrors(base.replace('8080', '"${PORT:-8080}"'))).toEqual([]);
    expect(editorErrors(`${base}mode: "\${MODE:-strict}"\n`)).toEqual([]);
  });
});
