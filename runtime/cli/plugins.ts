/**
 * `switchyard plugins [name] [--json]`: the stage plugins and resource types this installation
 * knows, where each is defined, and for one of them its options (from its JSON Schema) and the
 * request state it needs and provides.
 */
import { parseArgs } from 'node:util';
import { loadCatalog } from '../catalog.ts';
import { didYouMean } from '../config/suggest.ts';
import type { AnyDefinition } from '../plugin.ts';
import type { CliIo } from './io.ts';
import { renderTable } from './table.ts';

export const pluginsUsage = `usage: switchyard plugins [<name>] [--json]
  Without a name: every stage plugin and resource type, its folder and what it does.
  With a name (a stage plugin or a resource type): its options, their types and defaults,
  and the request state it needs and provides.
`;

type Schema = {
  type?: string | string[];
  enum?: unknown[];
  default?: unknown;
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  oneOf?: Schema[];
  anyOf?: Schema[];
};

export async function plugins(args: string[], io: CliIo): Promise<number> {
  let values: { json?: boolean; help?: boolean };
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args,
      allowPositionals: true,
      options: { json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }));
  } catch (err) {
    io.err(`switchyard plugins: ${(err as Error).message.split('. ')[0]} (see switchyard plugins --help)\n`);
    return 2;
  }
  if (values.help) {
    io.out(pluginsUsage);
    return 0;
  }
  const catalog = await loadCatalog();
  const all = catalog.all();
  const nameOf = (d: AnyDefinition) => (d.kind === 'stage' ? d.name : d.type);
  const [name, ...extra] = positionals;
  if (extra.length > 0) {
    io.err(`switchyard plugins: unexpected argument ${extra[0]} (see switchyard plugins --help)\n`);
    return 2;
  }
  if (name === undefined) {
    const list = all.map((d) => ({
      name: nameOf(d),
      kind: d.kind,
      folder: catalog.origin(d),
      description: d.description,
    }));
    list.sort((a, b) => a.name.localeCompare(b.name));
    if (values.json) io.out(`${JSON.stringify(list, null, 2)}\n`);
    else {
      const rows = list.map((p) => [p.name, p.kind, p.folder, p.description]);
      io.out(
        `${renderTable([{ title: 'NAME' }, { title: 'KIND' }, { title: 'FOLDER' }, { title: 'DESCRIPTION' }], rows)}\n`,
      );
    }
    return 0;
  }
  const def = all.find((d) => nameOf(d) === name);
  if (!def) {
    io.err(`switchyard plugins: no plugin or resource type "${name}"${didYouMean(name, all.map(nameOf))}\n`);
    return 2;
  }
  if (values.json) {
    io.out(
      `${JSON.stringify({ name, kind: def.kind, folder: catalog.origin(def), description: def.description, ...pluginFacts(def) }, null, 2)}\n`,
    );
    return 0;
  }
  io.out(describePlugin(def, catalog.origin(def), 'text'));
  return 0;
}

interface OptionFact {
  option: string;
  type: string;
  required: boolean;
  default: unknown;
  description: string;
}

/** Options (from the JSON Schema), needs and provides of a definition. */
export function pluginFacts(def: AnyDefinition): { options: OptionFact[]; needs: string; provides: string } {
  const schema = def.options as Schema;
  const options = Object.entries(schema.properties ?? {}).map(([key, s]) => ({
    option: key,
    type: typeOf(s),
    required: (schema.required ?? []).includes(key),
    default: s.default,
    description: s.description ?? '',
  }));
  return def.kind === 'stage'
    ? { options, needs: fieldsOf(def.needs), provides: fieldsOf(def.provides) }
    : { options, needs: 'n/a', provides: 'n/a' };
}

/** One plugin as text for the terminal, or as Markdown (the plugin folders' READMEs). */
export function describePlugin(def: AnyDefinition, origin: string, format: 'text' | 'markdown'): string {
  const name = def.kind === 'stage' ? def.name : def.type;
  const { options, needs, provides } = pluginFacts(def);
  const kind = def.kind === 'stage' ? 'stage plugin' : 'resource type';
  const wraps = def.kind === 'stage' && def.wraps?.length ? `    wraps: ${def.wraps.join(', ')}` : '';
  const state = def.kind === 'stage' ? `needs: ${needs || '-'}    provides: ${provides || '-'}${wraps}` : '';
  const rows = options.map((o) => [
    `${o.option}${o.required ? ' *' : ''}`,
    o.type,
    o.default === undefined ? '' : JSON.stringify(o.default),
    o.description,
  ]);
  const required = rows.some((r) => r[0]?.endsWith(' *')) ? '* required\n' : '';
  if (format === 'text') {
    const head = [`${name} (${kind}, ${origin})`, def.description, ...(state ? [state] : [])].join('\n');
    const table = rows.length
      ? renderTable([{ title: 'OPTION' }, { title: 'TYPE' }, { title: 'DEFAULT' }, { title: 'DESCRIPTION' }], rows)
      : '(no options)';
    return `${head}\n\n${table}\n${required}`;
  }
  const cell = (t: string) => t.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const table = rows.length
    ? [
        '| option | type | default | description |',
        '|---|---|---|---|',
        ...rows.map((r) => `| ${r.map((c) => cell(c ?? '')).join(' | ')} |`),
      ].join('\n')
    : '(no options)';
  return [
    `## \`${name}\` (${kind})`,
    '',
    def.description,
    '',
    ...(state ? [`State: ${state.replaceAll('    ', '; ')}.`, ''] : []),
    table,
    ...(required ? ['', '\\* required'] : []),
    '',
  ].join('\n');
}

function typeOf(s: Schema): string {
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  const alternatives = s.oneOf ?? s.anyOf;
  if (alternatives) return alternatives.map(typeOf).join(' | ');
  const t = Array.isArray(s.type) ? s.type.join(' | ') : (s.type ?? 'any');
  return t === 'array' && s.items ? `${typeOf(s.items)}[]` : t;
}

/** Fixed fields, or "depends on options" for a function of them. */
function fieldsOf(fields: unknown): string {
  if (typeof fields === 'function') return 'depends on options';
  return Array.isArray(fields) ? fields.join(', ') : '';
}
