/**
 * Header contracts: a stage may declare a request header it sets (`provides`, e.g. pii-count's
 * count header) or needs an earlier stage to have set (`needs`). The loader checks them as it
 * checks state fields (at `switchyard validate`, start and every reload: the same `loadService`),
 * naming the stage's position, the header and the route; the right order loads.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadService } from '../../runtime/config/load.ts';

const fixture = join(import.meta.dirname, '../fixtures/header-stages.ts');

function config(pipeline: string[], servicePipeline: string[] = []): string {
  const stages = (list: string[], indent: string) => list.map((s) => `${indent}- ${s}`).join('\n');
  return [
    'service: headers',
    'listen: { port: 0 }',
    `plugins: ["${fixture}"]`,
    ...(servicePipeline.length > 0 ? ['pipeline:', stages(servicePipeline, '  ')] : []),
    'routes:',
    '  - match: { method: POST, path: /chat }',
    '    pipeline:',
    stages(pipeline, '      '),
    '',
  ].join('\n');
}

/** The problems the loader reports for a config, as [path, message]; [] when it loads. */
async function problems(text: string): Promise<string[][]> {
  const file = join(mkdtempSync(join(tmpdir(), 'sy-headers-')), 'svc.yaml');
  writeFileSync(file, text);
  try {
    await loadService(file);
    return [];
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return err.problems.map((p) => [p.path, p.message]);
  }
}

const needer = 'test-needs-header: { header: X-PII-Count }';
const respond = 'respond: { body: {} }';

describe('request header contracts', () => {
  it('refuses a stage that needs a header set only by a later stage, naming both and the route', async () => {
    expect(await problems(config([needer, 'pii-count: {}', respond]))).toEqual([
      [
        'routes[0].pipeline[0].test-needs-header',
        'needs request header "x-pii-count", which no earlier stage sets on route "POST /chat" ' +
          '(pii-count at routes[0].pipeline[1] provides it but runs after this stage; move it before)',
      ],
    ]);
  });

  it('refuses a need no stage of the path meets, suggesting the plugin that sets it', async () => {
    expect(await problems(config([needer, respond]))).toEqual([
      [
        'routes[0].pipeline[0].test-needs-header',
        'needs request header "x-pii-count", which no earlier stage sets on route "POST /chat" ' +
          '(pii-count provides it; put it before this stage)',
      ],
    ]);
  });

  it('refuses two stages of one path setting the same header (names compared case-insensitively)', async () => {
    const twice = config(['pii-count: { header: x-pii-count }', respond], ['pii-count: {}']);
    expect(await problems(twice)).toEqual([
      [
        'routes[0].pipeline[0].pii-count',
        'sets request header "x-pii-count", which pii-count at pipeline[0] sets too on route "POST /chat"; ' +
          'the upstream would get only the later value: keep one of them',
      ],
    ]);
  });

  it('loads the header set earlier on the route or by a service-wide stage, whatever its case', async () => {
    expect(await problems(config(['pii-count: {}', needer, respond]))).toEqual([]);
    expect(await problems(config(['test-needs-header: { header: x-pii-count }', respond], ['pii-count: {}']))).toEqual(
      [],
    );
    // A header of another name is not met by pii-count's.
    expect(
      (await problems(config(['pii-count: {}', 'test-needs-header: { header: X-Other }', respond])))[0]?.[1],
    ).toMatch(
      /^needs request header "x-other", which no earlier stage sets on route "POST \/chat" \(no plugin provides it\)$/,
    );
  });
});
