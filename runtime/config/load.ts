/**
 * Loading a service config: read (YAML/TOML) → interpolate `${VAR}` → apply `--set` overrides →
 * validate the service schema and every stage's and resource's options against its plugin's
 * schema, including the names options refer to (`x-ref`, see references.ts). All problems are
 * collected and reported together with file:line:column.
 */
import { dirname, resolve } from 'node:path';
import type { ErrorObject } from 'ajv/dist/2020.js';
import type { OnUninspectable } from '../answer/guard.ts';
import { type Catalog, loadCatalog } from '../catalog.ts';
import type { Mode } from '../mode.ts';
import type { OnError } from '../service/pipeline.ts';
import { canonicalJson, sha256Hex } from '../util/hash.ts';
import { pointerSegments } from '../util/schema-errors.ts';
import { developmentCredentialProblems } from './exposure.ts';
import { type DevelopmentDefault, type InterpolationProblem, interpolate } from './interpolate.ts';
import { checkNeeds } from './needs.ts';
import { compileSchema } from './options.ts';
import { applyOverride, parseOverride } from './overrides.ts';
import { DeclaredNames } from './references.ts';
import { serviceSchema } from './service-schema.ts';
import { settingsHeader, settingsOf, settingsVariables, templatePath, withEnvironment } from './settings.ts';
import {
  ConfigError,
  type ConfigPath,
  type ConfigProblem,
  type ConfigSource,
  formatPath,
  readConfigSource,
} from './source.ts';
import { listsFromStrings } from './string-lists.ts';
import { didYouMean } from './suggest.ts';
import type { RouteConfig, ServiceConfig, StageConfig } from './types.ts';

export interface LoadOptions {
  /** `path=value` overrides, as given to `--set`. */
  set?: string[];
  env?: Record<string, string | undefined>;
}

export interface LoadedService {
  file: string;
  configDir: string;
  config: ServiceConfig;
  /** sha256 of the effective config (after interpolation, overrides and defaults). */
  hash: string;
  catalog: Catalog;
}

const compile = compileSchema;

const validateService = compile(serviceSchema());

export async function loadService(file: string, options: LoadOptions = {}): Promise<LoadedService> {
  const path = resolve(file);
  const env = options.env ?? process.env;
  let source = readConfigSource(path);
  const problems: ConfigProblem[] = [];
  const reportIn =
    (src: ConfigSource) =>
    (at: ConfigPath, message: string, pathText = formatPath(at), point: 'value' | 'key' = 'value') => {
      const pos = src.locate(at, point);
      problems.push({ file: src.file, line: pos.line, column: pos.column, path: pathText, message });
    };

  // A settings file (see settings.ts): its values become variables of the template it names.
  let variables = env;
  const header = settingsHeader(source.value);
  if (header) {
    const settingsSource = source;
    source = readConfigSource(templatePath(path, header));
    const { settings: schema, ...template } = (source.value ?? {}) as Record<string, unknown>;
    source = { ...source, value: template };
    // Environment first, then the schema (coercion, defaults), then the environment again for
    // keys that only the schema's defaults brought in, and a second check of those.
    let settings = withEnvironment(settingsOf(settingsSource.value), header, env);
    const validate = schema && typeof schema === 'object' ? compile(schema) : undefined;
    for (let pass = 0; validate && pass < 2; pass++) {
      if (!validate(settings)) {
        for (const e of validate.errors ?? []) reportAjv(e, [], reportIn(settingsSource));
        throw new ConfigError(problems);
      }
      if (pass === 0) settings = withEnvironment(settings, header, env);
    }
    variables = { ...env, ...settingsVariables(settings, header) };
  }
  const report = reportIn(source);
  if (!header && (source.value as Record<string, unknown> | null)?.settings !== undefined) {
    report(['settings'], 'only the template of a settings file declares settings (see docs/configuration.md)');
  }

  const interpolationProblems: InterpolationProblem[] = [];
  const developmentDefaults: DevelopmentDefault[] = [];
  let value = interpolate(source.value, variables, interpolationProblems, [], developmentDefaults);
  for (const p of interpolationProblems) report(p.path, p.message);
  for (const spec of options.set ?? []) {
    try {
      const o = parseOverride(spec);
      value = applyOverride(value, o.path, o.value);
    } catch (err) {
      problems.push({ file: path, line: 0, column: 0, path: '--set', message: (err as Error).message });
    }
  }

  value = listsFromStrings(value);
  // Every problem in one run: a service-level error does not hide those in plugin options below
  // (the checks that follow only read what is there, and their own failure is not reported over
  // the first problems).
  if (!validateService(value)) {
    for (const e of validateService.errors ?? []) reportAjv(e, [], report);
    const found = problems.length;
    try {
      await checkPlugins(value as Record<string, unknown>, dirname(path), report);
    } catch {
      problems.splice(found);
    }
    throw new ConfigError(problems);
  }
  const raw = value as Record<string, unknown>;
  for (const p of developmentCredentialProblems(raw, developmentDefaults)) report(p.path, p.message);
  if (problems.length > 0) throw new ConfigError(problems);
  const configDir = dirname(path);
  let catalog: Catalog;
  try {
    catalog = await loadCatalog((raw.plugins as string[] | undefined) ?? [], configDir);
  } catch (err) {
    report(['plugins'], (err as Error).message);
    throw new ConfigError(problems);
  }

  const names = declaredNames(raw);
  const invalid = new Set<StageConfig>();
  const config = normalise(raw, catalog, names, report, invalid);
  checkResources(raw, catalog, names, report);
  checkRoutes(config, report);
  checkNeeds({ config, catalog, report, invalid, defaults: defaultOptions });
  if (problems.length > 0) throw new ConfigError(problems);
  return { file: path, configDir, config, hash: `sha256:${sha256Hex(canonicalJson(value))}`, catalog };
}

type Report = (at: ConfigPath, message: string, pathText?: string, point?: 'value' | 'key') => void;

/** The plugin-level checks alone (stage and resource options), for a file whose service-level shape failed. */
async function checkPlugins(raw: Record<string, unknown>, configDir: string, report: Report): Promise<void> {
  const catalog = await loadCatalog(Array.isArray(raw.plugins) ? (raw.plugins as string[]) : [], configDir);
  const names = declaredNames(raw);
  const stages = (list: unknown, at: ConfigPath) => {
    if (!Array.isArray(list)) return;
    list.forEach((item, i) => {
      if (item && typeof item === 'object')
        parseStage(item as Record<string, unknown>, [...at, i], catalog, names, report);
    });
  };
  stages(raw.pipeline, ['pipeline']);
  if (Array.isArray(raw.routes)) {
    for (const [i, r] of raw.routes.entries())
      stages((r as { pipeline?: unknown })?.pipeline, ['routes', i, 'pipeline']);
  }
  if (raw.resources && typeof raw.resources === 'object') checkResources(raw, catalog, names, report);
}

function reportAjv(e: ErrorObject, base: ConfigPath, report: Report): void {
  const at: ConfigPath = [...base, ...pointerSegments(e.instancePath).map((s) => (/^\d+$/.test(s) ? Number(s) : s))];
  // `if`/`then` only says that a conditional branch failed: the branch's own error says where.
  if (e.keyword === 'if') return;
  const params = e.params as Record<string, unknown>;
  let message = e.message ?? 'invalid';
  if (e.keyword === 'false schema') {
    // A property a `false` schema refuses (e.g. `url` beside `endpoints`, an OpenAI-only key on
    // an `http` upstream): ajv's "boolean schema is false" names nothing a user wrote.
    report(at, 'not allowed here', undefined, 'key');
    return;
  }
  if (e.keyword === 'additionalProperties') {
    const name = String(params.additionalProperty);
    at.push(name);
    const known = Object.keys((e.parentSchema as { properties?: object } | undefined)?.properties ?? {});
    message = `unknown property${didYouMean(name, known)}`;
    report(at, message, undefined, 'key');
    return;
  }
  if (e.keyword === 'enum') {
    const allowed = params.allowedValues as unknown[];
    const strings = allowed.filter((v): v is string => typeof v === 'string');
    const hint = typeof e.data === 'string' ? didYouMean(e.data, strings) : '';
    message = `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}${hint}`;
  } else if (e.keyword === 'required') {
    message = `missing required property "${params.missingProperty}"`;
  }
  report(at, message);
}

/** What options may refer to by name: upstreams, resources and route ids. */
function declaredNames(raw: Record<string, unknown>): DeclaredNames {
  return new DeclaredNames({
    upstream: new Set(Object.keys((raw.upstreams as object | undefined) ?? {})),
    resource: new Set(Object.keys((raw.resources as object | undefined) ?? {})),
    route: new Set(((raw.routes as Array<Record<string, unknown>> | undefined) ?? []).map((r) => routeShape(r).id)),
  });
}

/** A route's methods and id (`"<METHODS> <path>"` unless `id` is given). */
function routeShape(r: Record<string, unknown>): { id: string; methods: string[]; path: string } {
  const match = r.match as { method?: string | string[]; path: string };
  const methods = (Array.isArray(match.method) ? match.method : [match.method ?? 'GET']).map((m) => m.toUpperCase());
  return { id: (r.id as string | undefined) ?? `${methods.join(',')} ${match.path}`, methods, path: match.path };
}

function normalise(
  raw: Record<string, unknown>,
  catalog: Catalog,
  names: DeclaredNames,
  report: Report,
  invalid: Set<StageConfig>,
): ServiceConfig {
  const parse = (item: Record<string, unknown>, at: ConfigPath): StageConfig => {
    const stage = parseStage(item, at, catalog, names, report);
    if (stage.invalid) invalid.add(stage.config);
    return stage.config;
  };
  const stagesAt = (list: unknown[], at: ConfigPath): StageConfig[] =>
    list.map((item, i) => parse(item as Record<string, unknown>, [...at, i]));

  const pipeline = stagesAt((raw.pipeline as unknown[]) ?? [], ['pipeline']);
  // Shorthands: `auth:` and `rate_limit:` become stages after the service-wide ones.
  for (const [key, plugin] of [
    ['auth', 'auth'],
    ['rate_limit', 'rate-limit'],
  ] as const) {
    const block = raw[key] as Record<string, unknown> | undefined;
    if (!block?.enabled) continue;
    const { enabled: _enabled, ...options } = block;
    pipeline.push(parse({ [plugin]: options }, [key]));
  }

  const routes: RouteConfig[] = ((raw.routes as Array<Record<string, unknown>>) ?? []).map((r, i) => {
    return {
      ...routeShape(r),
      dialect: r.dialect as string | undefined,
      mode: r.mode as Mode | undefined,
      pipeline: stagesAt(r.pipeline as unknown[], ['routes', i, 'pipeline']),
    };
  });
  return { ...(raw as unknown as ServiceConfig), pipeline, routes };
}

function parseStage(
  item: Record<string, unknown>,
  at: ConfigPath,
  catalog: Catalog,
  declared: DeclaredNames,
  report: Report,
): { config: StageConfig; invalid: boolean } {
  const { on_error, on_uninspectable, ...rest } = item;
  const names = Object.keys(rest);
  const stage: StageConfig = {
    plugin: names[0] ?? '',
    options: {},
    onError: (on_error as OnError) ?? 'fail-closed',
    onUninspectable: (on_uninspectable as OnUninspectable) ?? 'refuse',
    path: at,
  };
  if (names.length !== 1) {
    report(at, `a stage names exactly one plugin, found ${names.length ? names.join(', ') : 'none'}`);
    return { config: stage, invalid: true };
  }
  const def = catalog.stage(stage.plugin);
  // Unsaid in the config: what the plugin declares (a pure observer passes), else refuse.
  if (on_uninspectable === undefined && def?.onUninspectable) stage.onUninspectable = def.onUninspectable;
  if (!def) {
    report(
      [...at, stage.plugin],
      `unknown plugin "${stage.plugin}"${didYouMean(stage.plugin, catalog.stageNames())}`,
      undefined,
      'key',
    );
    return { config: stage, invalid: true };
  }
  const options = (rest[stage.plugin] ?? {}) as Record<string, unknown>;
  const valid = checkOptions(def.options, options, declared, [...at, stage.plugin], report);
  stage.options = options;
  return { config: stage, invalid: !valid };
}

/** Validates options in place (ajv writes defaults into them) and reports every problem under `at`. */
function checkOptions(
  schema: object,
  options: Record<string, unknown>,
  names: DeclaredNames,
  at: ConfigPath,
  report: Report,
): boolean {
  const validate = compile(schema);
  if (validate.call(names, options)) return true;
  for (const e of validate.errors ?? []) reportAjv(e, at, report);
  return false;
}

/** A plugin's options when none are written: `{}` with its schema's defaults (valid or not). */
function defaultOptions(def: { options: object }): Record<string, unknown> {
  const options = {};
  compile(def.options)(options);
  return options;
}

function checkResources(raw: Record<string, unknown>, catalog: Catalog, names: DeclaredNames, report: Report): void {
  for (const [name, block] of Object.entries((raw.resources as Record<string, Record<string, unknown>>) ?? {})) {
    const def = catalog.resource(String(block.type));
    if (!def) {
      const hint = didYouMean(String(block.type), catalog.resourceTypes());
      report(['resources', name, 'type'], `unknown resource type "${block.type}"${hint}`);
      continue;
    }
    const { type: _type, ...options } = block;
    checkOptions(def.options, options, names, ['resources', name], report);
    // Write back defaults applied by ajv.
    Object.assign(block, options);
  }
}

function checkRoutes(config: ServiceConfig, report: Report): void {
  const seen = new Map<string, number>();
  config.routes.forEach((r, i) => {
    for (const m of r.methods) {
      const key = `${m} ${r.path}`;
      if (seen.has(key)) report(['routes', i, 'match'], `duplicate route ${key} (also routes[${seen.get(key)}])`);
      else seen.set(key, i);
    }
    if (r.dialect === undefined) r.dialect = config.dialect;
  });
}

export type { ConfigSource };
export { ConfigError };
