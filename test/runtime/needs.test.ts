/**
 * Declared state checked at load: a stage whose `needs` no EARLIER stage provides is refused by
 * `switchyard validate` and by a hot reload (the running graph keeps answering); so are a mode or
 * a policy phase that is not one of the known values. The shipped configs and correctly ordered
 * pipelines still load.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../runtime/catalog.ts';
import type { PluginDefinition } from '../../runtime/plugin.ts';
import { type StartedService, startService } from '../../runtime/testing.ts';

const run = promisify(execFile);
const root = join(import.meta.dirname, '../..');
const testStages = join(import.meta.dirname, '../fixtures/test-stages.ts');

/** Hints the loader gives when no stage of the path provides a field (from the catalog). */
const provide = {
  rpc: 'jsonrpc-envelope or jsonrpc-parse provide it; put one of them before this stage',
  stype: 'stype-resolve provides it; put it before this stage',
  caller: 'auth, oauth-bearer, tenant-auth or user-guard provide it; put one of them before this stage',
  searchResults: 'web-search provides it; put it before this stage',
};
const after = (plugin: string, at: string) =>
  `${plugin} at ${at} provides it but runs after this stage; move it before`;

interface Refused {
  /** Index in `stages` of the stage refused. */
  stage: number;
  need: string;
  hint: string;
}

interface Case {
  name: string;
  /** The route's stages, mis-ordered (or missing a provider); `{route}` is the route's index. */
  stages: string[];
  refused: Refused[];
  /** The same pipeline in an order that loads. */
  fixed: string[];
}

const proxy = 'proxy: { upstream: u }';
const cases: Case[] = [
  {
    name: 'stype-resolve without a parsed message',
    stages: ['stype-resolve: { registry: registry }', proxy],
    refused: [{ stage: 0, need: 'rpc', hint: provide.rpc }],
    fixed: ['jsonrpc-parse: {}', 'stype-resolve: { registry: registry }', proxy],
  },
  {
    // The issue's case: a strict route answered an invalid tools/call with 200.
    name: 'schema-validate before stype-resolve',
    stages: [
      'jsonrpc-parse: {}',
      'schema-validate: { registry: registry }',
      'stype-resolve: { registry: registry }',
      proxy,
    ],
    refused: [{ stage: 1, need: 'stype', hint: after('stype-resolve', 'routes[{route}].pipeline[2]') }],
    fixed: [
      'jsonrpc-parse: {}',
      'stype-resolve: { registry: registry }',
      'schema-validate: { registry: registry }',
      proxy,
    ],
  },
  {
    name: 'mcp-validate without a parsed message',
    stages: ['mcp-validate: {}', proxy],
    refused: [{ stage: 0, need: 'rpc', hint: provide.rpc }],
    fixed: ['jsonrpc-parse: {}', 'mcp-validate: {}', proxy],
  },
  {
    name: 'schema-validate with neither a parser nor a resolver',
    stages: ['schema-validate: { registry: registry }', proxy],
    refused: [
      { stage: 0, need: 'rpc', hint: provide.rpc },
      { stage: 0, need: 'stype', hint: provide.stype },
    ],
    fixed: [
      'jsonrpc-parse: {}',
      'stype-resolve: { registry: registry }',
      'schema-validate: { registry: registry }',
      proxy,
    ],
  },
  {
    name: 'qom-score before the envelope and the resolver',
    stages: [
      'qom-score: { registry: registry }',
      'jsonrpc-envelope: {}',
      'stype-resolve: { registry: registry }',
      proxy,
    ],
    refused: [
      { stage: 0, need: 'rpc', hint: after('jsonrpc-envelope', 'routes[{route}].pipeline[1]') },
      { stage: 0, need: 'stype', hint: after('stype-resolve', 'routes[{route}].pipeline[2]') },
    ],
    fixed: [
      'jsonrpc-envelope: {}',
      'stype-resolve: { registry: registry }',
      'qom-score: { registry: registry }',
      proxy,
    ],
  },
  {
    name: 'policy selecting by caller with no authentication',
    stages: ['policy: { files: [p.yaml], select_from: caller.attributes.policy }', proxy],
    refused: [{ stage: 0, need: 'caller', hint: provide.caller }],
    fixed: [
      'tenant-auth: { tenants: tenants }',
      'policy: { files: [p.yaml], select_from: caller.attributes.policy }',
      proxy,
    ],
  },
  {
    name: "classify choosing the caller's classifiers before tenant-auth",
    stages: ['classify: { use_from: caller.attributes.classifiers }', 'tenant-auth: { tenants: tenants }', proxy],
    refused: [{ stage: 0, need: 'caller', hint: after('tenant-auth', 'routes[{route}].pipeline[1]') }],
    fixed: ['tenant-auth: { tenants: tenants }', 'classify: { use_from: caller.attributes.classifiers }', proxy],
  },
  {
    // A disabled auth stage provides no caller.
    name: 'rate-limit keyed by caller behind a disabled auth',
    stages: ['auth: { enabled: false }', 'rate-limit: { limit: 5, key: caller }', proxy],
    refused: [{ stage: 1, need: 'caller', hint: provide.caller }],
    fixed: ['auth: { tokens: [t] }', 'rate-limit: { limit: 5, key: caller }', proxy],
  },
  {
    name: "rate-limit reading the caller's limit before user-guard",
    stages: ['rate-limit: { limit: 5, limit_from: caller.attributes.rpm }', 'user-guard: { users: users }', proxy],
    refused: [{ stage: 0, need: 'caller', hint: after('user-guard', 'routes[{route}].pipeline[1]') }],
    fixed: ['user-guard: { users: users }', 'rate-limit: { limit: 5, limit_from: caller.attributes.rpm }', proxy],
  },
  {
    name: 'fan-out with no web-search',
    stages: ['fan-out: { processor: http, http: { upstream: u } }'],
    refused: [{ stage: 0, need: 'searchResults', hint: provide.searchResults }],
    fixed: ['web-search: { search: search }', 'fan-out: { processor: http, http: { upstream: u } }'],
  },
  {
    name: 'fan-out reading a field no plugin provides',
    stages: ['fan-out: { from: nothing.here, processor: http, http: { upstream: u } }'],
    refused: [{ stage: 0, need: 'nothing', hint: 'no plugin provides it' }],
    fixed: [
      'web-search: { search: search }',
      'fan-out: { from: searchResults, processor: http, http: { upstream: u } }',
    ],
  },
];

/** Upstreams and resources the cases name (validated, never built by a refused load). */
const declarations = `upstreams:
  u: { kind: http, url: "http://127.0.0.1:1" }
resources:
  registry: { type: stype-registry, dir: ./registry }
  tenants: { type: tenant-directory, tenants: [] }
  store: { type: entity-store }
  users: { type: user-directory, store: store }
  classifiers: { type: classifier-set, classifiers: [{ name: pii, type: pattern, detectors: [pii] }] }
  search: { type: web-search, upstream: u }
`;

/** The start of a service file: an /echo route, and (unless `bare`) the declarations the cases name. */
const head = (extra = '', bare = false) => `service: needs
listen: { port: 0 }
admin: { port: 0 }
plugins: [${testStages}]
${extra}${bare ? '' : declarations}routes:
  - match: { path: /echo }
    pipeline: [{ test-echo: { text: "\${ECHO_TEXT:-first}" } }]
`;

function routeYaml(path: string, stages: string[], method = 'POST'): string {
  return `  - match: { method: ${method}, path: ${path} }\n    pipeline:\n${stages.map((s) => `      - ${s}\n`).join('')}`;
}

/** 1-based line of the first line containing `needle`. */
const lineOf = (text: string, needle: string) => text.split('\n').findIndex((l) => l.includes(needle)) + 1;

interface Problem {
  line: number;
  column: number;
  path: string;
  message: string;
}

/** A service file with `cases` as routes 1..n (route 0 is /echo), and the problems each must give. */
function casesFile(list: Case[], mode: 'stages' | 'fixed', extra = ''): { text: string; problems: Problem[] } {
  let text = head(extra);
  const problems: Problem[] = [];
  list.forEach((c, i) => {
    const route = i + 1;
    const firstLine = text.split('\n').length + 2; // after `- match:` and `pipeline:`
    text += routeYaml(`/case-${i}`, c[mode]);
    if (mode === 'fixed') return;
    for (const r of c.refused) {
      const plugin = c.stages[r.stage]?.split(':')[0] as string;
      problems.push({
        line: firstLine + r.stage,
        column: 9,
        path: `routes[${route}].pipeline[${r.stage}].${plugin}`,
        message: `needs "${r.need}", which no earlier stage provides (${r.hint.replace('{route}', String(route))})`,
      });
    }
  });
  return { text, problems };
}

/** Stages in front of every route: they run first, so a route stage cannot provide for them. */
function serviceWideFile(): { text: string; problems: Problem[] } {
  const text = `${head(`rate_limit:
  enabled: true
  limit: 5
  key: caller
pipeline:
  - policy: { files: [p.yaml], select_from: caller.attributes.policy }
`)}${routeYaml('/x', ['tenant-auth: { tenants: tenants }', proxy])}`;
  const at = (needle: string) => lineOf(text, needle);
  return {
    text,
    // In file order.
    problems: [
      {
        // The shorthand block's position: its first key.
        line: at('  enabled: true'),
        column: 3,
        path: 'rate_limit.rate-limit',
        message: `needs "caller", which no earlier stage provides (${provide.caller})`,
      },
      {
        line: at('  - policy:'),
        column: 5,
        path: 'pipeline[0].policy',
        message: `needs "caller", which no earlier stage provides (${provide.caller})`,
      },
    ],
  };
}

/** The service-wide stages provide for every route: `auth:` before `rate_limit:` and the routes. */
const serviceWideFixed = `${head(`auth: { enabled: true, tokens: [t] }
rate_limit: { enabled: true, limit: 5, key: caller }
`)}${routeYaml('/x', ['policy: { files: [p.yaml], select_from: caller.attributes.policy }', proxy])}`;

/** Closed sets of values: a misspelt mode or phase is an error at its position. */
const modesText = `service: modes
listen: { port: 0 }
mode: strikt
routes:
  - match: { path: /x }
    mode: permisive
    pipeline: [{ respond: { body: {} } }]
`;
const modesProblems: Problem[] = [
  {
    line: 3,
    column: 7,
    path: 'mode',
    message: 'must be one of "strict", "permissive", "audit" (did you mean "strict"?)',
  },
  {
    line: 6,
    column: 11,
    path: 'routes[0].mode',
    message: 'must be one of "strict", "permissive", "audit" (did you mean "permissive"?)',
  },
];
const phaseText = `service: phases
listen: { port: 0 }
mode: strict
routes:
  - match: { path: /x }
    pipeline:
      - policy: { files: [p.yaml], phase: egres }
      - respond: { body: {} }
`;
const phaseProblems: Problem[] = [
  {
    line: 7,
    column: 43,
    path: 'routes[0].pipeline[0].policy.phase',
    message: 'must be one of "ingress", "egress" (did you mean "egress"?)',
  },
];

const format = (file: string, p: Problem) => `${file}:${p.line}:${p.column}: ${p.path}: ${p.message}`;

function writeIn(dir: string, name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

describe('needs and provides of the built-in stages', () => {
  it('every static need of a built-in stage has a case here', async () => {
    const catalog = await loadCatalog();
    const tested = new Set(cases.flatMap((c) => c.refused.map((r) => `${c.stages[r.stage]?.split(':')[0]}:${r.need}`)));
    for (const d of catalog.all()) {
      const def = d as PluginDefinition<Record<string, unknown>>;
      if (def.kind !== 'stage' || !Array.isArray(def.needs)) continue;
      for (const need of def.needs) expect(tested, `${def.name} needs ${need}`).toContain(`${def.name}:${need}`);
    }
  });

  it('every stage a built-in stage wraps is a stage of the catalog; audit wraps policy', async () => {
    const catalog = await loadCatalog();
    for (const d of catalog.all()) {
      if (d.kind !== 'stage') continue;
      for (const inner of d.wraps ?? []) expect(catalog.stage(inner), `${d.name} wraps ${inner}`).toBeDefined();
    }
    expect(catalog.stage('audit')?.wraps).toContain('policy');
  });
});

/**
 * `wraps`: the audit stage must wrap policy (the decisions policy takes, its answer phase
 * included, are recorded by the audit stage once they return). A path where policy runs first is
 * refused, naming both stages and the route; the order that wraps loads.
 */
const auditResource = `resources:
  audit: { type: audit-chain, path: ./audit.db }
`;
const wrapsText = `service: wraps
listen: { port: 0 }
admin: { port: 0 }
${auditResource}pipeline:
  - policy: { files: [p.yaml] }
routes:
  - match: { method: POST, path: /inside }
    pipeline:
      - audit: { chain: audit }
      - respond: { body: {} }
  - id: chat
    match: { method: POST, path: /chat }
    pipeline:
      - respond: { body: {} }
`;
const wrapsRouteText = `service: wraps-route
listen: { port: 0 }
${auditResource}routes:
  - match: { method: POST, path: /chat }
    pipeline:
      - policy: { files: [p.yaml] }
      - audit: { chain: audit }
      - respond: { body: {} }
`;
const wrapsServiceText = `service: wraps-service
listen: { port: 0 }
${auditResource}pipeline:
  - policy: { files: [p.yaml] }
  - audit: { chain: audit }
routes:
  - match: { method: POST, path: /chat }
    pipeline:
      - respond: { body: {} }
`;
const wrapsFixed = `service: wraps-fixed
listen: { port: 0 }
${auditResource}pipeline:
  - audit: { chain: audit }
routes:
  - match: { method: POST, path: /chat }
    pipeline:
      - policy: { files: [p.yaml] }
      - respond: { body: {} }
  - match: { method: POST, path: /twice }
    pipeline:
      - policy: { files: [p.yaml] }
      - respond: { body: {} }
`;
const wrapsMessage = (inner: string, on: string) =>
  `must wrap policy, but policy at ${inner} runs before it ${on}; move audit before policy`;
const wrapsProblems: Problem[] = [
  {
    line: lineOf(wrapsText, '- audit:'),
    column: 9,
    path: 'routes[0].pipeline[0].audit',
    message: wrapsMessage('pipeline[0]', 'on route "POST /inside"'),
  },
];
const wrapsServiceProblems: Problem[] = [
  {
    line: lineOf(wrapsServiceText, '- audit:'),
    column: 5,
    path: 'pipeline[1].audit',
    message: wrapsMessage('pipeline[0]', 'on every route'),
  },
];
const wrapsRouteProblems: Problem[] = [
  {
    line: lineOf(wrapsRouteText, '- audit:'),
    column: 9,
    path: 'routes[0].pipeline[1].audit',
    message: wrapsMessage('routes[0].pipeline[0]', 'on route "POST /chat"'),
  },
];

describe('switchyard validate', () => {
  it('refuses each mis-ordered pipeline and each unknown mode or phase at its position; accepts the shipped configs and correct orders', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sy-needs-'));
    const routes = casesFile(cases, 'stages');
    const service = serviceWideFile();
    const files = {
      routes: writeIn(dir, 'routes.yaml', routes.text),
      service: writeIn(dir, 'service.yaml', service.text),
      modes: writeIn(dir, 'modes.yaml', modesText),
      phase: writeIn(dir, 'phase.yaml', phaseText),
      fixed: writeIn(dir, 'fixed.yaml', casesFile(cases, 'fixed').text),
      serviceFixed: writeIn(dir, 'service-fixed.yaml', serviceWideFixed),
      wraps: writeIn(dir, 'wraps.yaml', wrapsText),
      wrapsRoute: writeIn(dir, 'wraps-route.yaml', wrapsRouteText),
      wrapsService: writeIn(dir, 'wraps-service.yaml', wrapsServiceText),
      wrapsFixed: writeIn(dir, 'wraps-fixed.yaml', wrapsFixed),
    };
    const shipped = readdirSync(join(root, 'configs'))
      .filter((f) => /\.(ya?ml|toml)$/.test(f))
      .map((f) => `configs/${f}`);
    expect(shipped).toContain('configs/typed-proxy.yaml');
    const err = await run('node', ['bin/switchyard.js', 'validate', ...Object.values(files), ...shipped], {
      cwd: root,
    }).catch((e) => e);
    expect(err.code).toBe(1);
    const expected = [
      ...routes.problems.map((p) => format(files.routes, p)),
      ...service.problems.map((p) => format(files.service, p)),
      ...modesProblems.map((p) => format(files.modes, p)),
      ...phaseProblems.map((p) => format(files.phase, p)),
      ...wrapsProblems.map((p) => format(files.wraps, p)),
      ...wrapsRouteProblems.map((p) => format(files.wrapsRoute, p)),
      ...wrapsServiceProblems.map((p) => format(files.wrapsService, p)),
    ];
    expect(err.stderr.trim().split('\n').sort()).toEqual(expected.sort());
    for (const ok of [files.fixed, files.serviceFixed, files.wrapsFixed, ...shipped]) {
      expect(err.stdout).toContain(`${ok}: ok\n`);
    }
  }, 120_000); // one `switchyard validate` process loading every shipped config: 30 s failed on a loaded machine
});

describe('hot reload', () => {
  let file: string;
  let svc: StartedService;

  beforeAll(async () => {
    // Only the /echo route runs: the refused configs are never built.
    file = writeIn(mkdtempSync(join(tmpdir(), 'sy-needs-reload-')), 'svc.yaml', head('', true));
    svc = await startService(file);
  });
  afterAll(() => svc?.close());

  const reload = async () => {
    const res = await fetch(`${svc.adminUrl}/admin/reload`, { method: 'POST' });
    return { status: res.status, body: await res.json() };
  };
  const echo = async () => (await (await fetch(`${svc.url}/echo`)).json()).text;

  const strikt = head().replace('plugins:', 'mode: strikt\nplugins:');
  const egres = `${head()}${routeYaml('/p', ['policy: { files: [p.yaml], phase: egres }', proxy])}`;
  const audited =
    `${head()}${routeYaml('/audited', ['policy: { files: [p.yaml] }', 'audit: { chain: audit }', proxy])}`.replace(
      'resources:\n',
      'resources:\n  audit: { type: audit-chain, path: ./audit.db }\n',
    );
  const refusals = [
    ...cases.map((c) => ({ name: c.name, ...casesFile([c], 'stages') })),
    { name: 'service-wide stages needing what a route provides', ...serviceWideFile() },
    {
      name: 'policy before the audit stage that must wrap it',
      text: audited,
      problems: [
        {
          line: lineOf(audited, 'audit: { chain'),
          column: 9,
          path: 'routes[1].pipeline[1].audit',
          message: wrapsMessage('routes[1].pipeline[0]', 'on route "POST /audited"'),
        },
      ],
    },
    {
      name: 'mode: strikt',
      text: strikt,
      problems: [
        {
          line: lineOf(strikt, 'strikt'),
          column: 7,
          path: 'mode',
          message: 'must be one of "strict", "permissive", "audit" (did you mean "strict"?)',
        },
      ],
    },
    {
      name: 'phase: egres',
      text: egres,
      problems: [
        {
          line: lineOf(egres, 'egres'),
          column: 43,
          path: 'routes[1].pipeline[0].policy.phase',
          message: 'must be one of "ingress", "egress" (did you mean "egress"?)',
        },
      ],
    },
  ];

  it.each(refusals)('refuses $name and keeps the running graph', async ({ text, problems }) => {
    const before = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
    writeFileSync(file, text);
    const { status, body } = await reload();
    expect(status).toBe(422);
    expect(body.status).toBe('failed');
    expect(body.problems).toEqual(problems.map((p) => ({ file, ...p })));
    expect(await echo()).toBe('first');
    const after = await (await fetch(`${svc.adminUrl}/admin/config`)).json();
    expect(after.config_hash).toBe(before.config_hash);
  });

  it('takes a correctly ordered pipeline', async () => {
    const stages = ['auth: { tokens: [t] }', 'rate-limit: { limit: 5, key: caller }', 'test-echo: { text: limited }'];
    writeFileSync(
      file,
      `${head('', true).replace('${ECHO_TEXT:-first}', 'second')}${routeYaml('/limited', stages, 'GET')}`,
    );
    const { status, body } = await reload();
    expect(body.error).toBeUndefined();
    expect(status).toBe(200);
    expect(await echo()).toBe('second');
    const limited = await fetch(`${svc.url}/limited`, { headers: { authorization: 'Bearer t' } });
    expect(limited.status).toBe(200);
    expect(limited.headers.get('x-ratelimit-limit')).toBe('5');
  });
});
