/**
 * Declared state, checked at load. A stage definition may say which request-state fields it
 * `needs` from earlier stages and which it `provides` (runtime/plugin.ts). Every need must be met
 * by an EARLIER stage of the same request path, in the order the runtime composes it
 * (runtime/service/graph.ts): the service-wide `pipeline:` stages, then the `auth:` and
 * `rate_limit:` shorthands (both already at the end of `config.pipeline`), then the route's own
 * stages. A need nothing meets is a config problem at the stage, with a suggestion taken from the
 * catalog: a strict route whose schema-validate has no stype-resolve in front would otherwise
 * pass every message.
 *
 * Ordering constraints are checked here too: a stage that `wraps` another (the audit stage wraps
 * policy: it records what policy decides) must run before it on every path they share.
 *
 * Request headers (`header:<name>` entries, `requestHeader(name)`) follow the same rule: a header
 * a stage needs must be set by an earlier stage of the path; and two stages of one path may not
 * both set the same header (the upstream would get only the later one's value). Those problems
 * name the route ("on every route" for the service-wide stages).
 */
import type { Catalog } from '../catalog.ts';
import { type Contract, coreStateFields, type PluginDefinition, stateFields } from '../plugin.ts';
import { type ConfigPath, formatPath } from './source.ts';
import type { ServiceConfig, StageConfig } from './types.ts';

type Report = (at: ConfigPath, message: string, pathText?: string) => void;
type Definition = PluginDefinition<Record<string, unknown>>;

export interface NeedsCheck {
  config: ServiceConfig;
  catalog: Catalog;
  report: Report;
  /** Stages whose options did not validate: their needs are not judged (already reported). */
  invalid: ReadonlySet<StageConfig>;
  /** A stage's options with the schema's defaults, for the catalog's suggestions. */
  defaults(def: Definition): Record<string, unknown>;
}

/** What the stages of a path so far provide: state fields, and request headers with the stage that sets each. */
interface Provided {
  fields: ReadonlySet<string>;
  headers: ReadonlyMap<string, StageConfig>;
}

/** The lower-case header name of a `header:<name>` entry; undefined for a state field. */
function headerOf(entry: Contract): string | undefined {
  return entry.startsWith('header:') ? entry.slice('header:'.length).toLowerCase() : undefined;
}

export function checkNeeds({ config, catalog, report, invalid, defaults }: NeedsCheck): void {
  const core = new Set<string>(coreStateFields);
  let providers: Map<string, string[]> | undefined;
  const suggestion = (field: string): string => {
    providers ??= catalogProviders(catalog, defaults);
    const names = providers.get(field) ?? [];
    if (names.length === 0) return 'no plugin provides it';
    if (names.length === 1) return `${names[0]} provides it; put it before this stage`;
    return `${names.slice(0, -1).join(', ')} or ${names.at(-1)} provide it; put one of them before this stage`;
  };

  /**
   * Checks a run of stages given what the stages before it provide; returns what is provided
   * after it. `on` names the route (for the header problems).
   */
  const walk = (stages: StageConfig[], before: Provided, on: string): Provided => {
    const provided = new Set(before.fields);
    const headers = new Map(before.headers);
    stages.forEach((stage, i) => {
      const def = catalog.stage(stage.plugin);
      if (!def) return; // unknown plugin: reported already
      const where = `${formatPath(stage.path)}.${stage.plugin}`;
      if (!invalid.has(stage)) {
        for (const need of fieldsOf(def, 'needs', stage, report, where)) {
          const header = headerOf(need);
          if (header === undefined ? core.has(need) || provided.has(need) : headers.has(header)) continue;
          const entry = header === undefined ? need : (`header:${header}` as const);
          const later = stages.slice(i + 1).find((s) => providesField(catalog.stage(s.plugin), s, entry));
          const hint = later
            ? `${later.plugin} at ${formatPath(later.path)} provides it but runs after this stage; move it before`
            : suggestion(entry);
          const problem =
            header === undefined
              ? `needs "${need}", which no earlier stage provides (${hint})`
              : `needs request header "${header}", which no earlier stage sets ${on} (${hint})`;
          report(stage.path, problem, where);
        }
      }
      for (const field of fieldsOf(def, 'provides', stage, report, where)) {
        const header = headerOf(field);
        if (header === undefined) {
          provided.add(field);
          continue;
        }
        const other = headers.get(header);
        if (other && other !== stage) {
          report(
            stage.path,
            `sets request header "${header}", which ${other.plugin} at ${formatPath(other.path)} sets too ${on}; ` +
              'the upstream would get only the later value: keep one of them',
            where,
          );
        }
        headers.set(header, stage);
      }
    });
    return { fields: provided, headers };
  };

  // Service-wide stages run in front of every route: checked once, and what they provide is
  // available to each route's own stages.
  const service = walk(config.pipeline, { fields: new Set(), headers: new Map() }, 'on every route');
  for (const route of config.routes) walk(route.pipeline, service, `on route "${route.id}"`);
  checkWraps(config, catalog, report);
}

/**
 * `wraps`: a stage that must wrap another (run before it on the request path, so that the other
 * runs inside it) is refused where the other runs first, naming both and the route. The
 * service-wide stages are checked once (they are in front of every route); a route's stage
 * against every stage before it, the service-wide ones included.
 */
function checkWraps(config: ServiceConfig, catalog: Catalog, report: Report): void {
  const check = (stages: StageConfig[], from: number, on: string) => {
    stages.forEach((stage, i) => {
      if (i < from) return;
      const wraps = catalog.stage(stage.plugin)?.wraps;
      if (!wraps || wraps.length === 0) return;
      const where = `${formatPath(stage.path)}.${stage.plugin}`;
      for (const inner of stages.slice(0, i)) {
        if (!wraps.includes(inner.plugin)) continue;
        report(
          stage.path,
          `must wrap ${inner.plugin}, but ${inner.plugin} at ${formatPath(inner.path)} runs before it ${on}; ` +
            `move ${stage.plugin} before ${inner.plugin}`,
          where,
        );
      }
    });
  };
  check(config.pipeline, 0, 'on every route');
  for (const route of config.routes) {
    check([...config.pipeline, ...route.pipeline], config.pipeline.length, `on route "${route.id}"`);
  }
}

function fieldsOf(
  def: Definition,
  key: 'needs' | 'provides',
  stage: StageConfig,
  report: Report,
  where: string,
): readonly Contract[] {
  try {
    return stateFields(def[key], stage.options);
  } catch (err) {
    report(stage.path, `plugin "${def.name}": its ${key} could not be worked out: ${(err as Error).message}`, where);
    return [];
  }
}

function providesField(def: Definition | undefined, stage: StageConfig, field: string): boolean {
  if (!def) return false;
  try {
    return stateFields(def.provides, stage.options).some((f) => normalized(f) === field);
  } catch {
    return false;
  }
}

/** Which catalog stages provide each field, with their default options, in catalog order. */
function catalogProviders(catalog: Catalog, defaults: NeedsCheck['defaults']): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const d of catalog.all()) {
    if (d.kind !== 'stage' || !d.provides) continue;
    const def = d as unknown as Definition;
    let fields: string[];
    try {
      fields = stateFields(def.provides, defaults(def)).map(normalized);
    } catch {
      continue;
    }
    for (const f of fields) {
      const names = out.get(f) ?? [];
      if (!names.includes(def.name)) names.push(def.name);
      out.set(f, names);
    }
  }
  return out;
}

/** A header entry with its name in lower case (as the checks compare them); a field as it is. */
function normalized(entry: Contract): string {
  const header = headerOf(entry);
  return header === undefined ? entry : `header:${header}`;
}
