/**
 * Downloads embedding models of the embedding service (plugins/embed/model-cards.ts) from the
 * Hugging Face hub into the models directory, laid out as the service reads them:
 * `<dir>/<Name>/<file in the repository>` plus tokenizer.json and, when the repository has them,
 * tokenizer_config.json, config.json and special_tokens_map.json.
 *
 *   npx tsx scripts/models/download-embedding.ts BGESmallENV15 [more names] [--dir DIR] [--force]
 *   npx tsx scripts/models/download-embedding.ts --all
 *   npx tsx scripts/models/download-embedding.ts --list
 *
 * The same command fetches a Tier B guard model (a Hugging Face sequence classifier exported to
 * ONNX: Prompt Guard 2, DeBERTa-v3 prompt-injection) into the classifiers' models directory, in
 * the layout the `hf-sequence-classification` format reads: config.json, tokenizer.json, the graph
 * at onnx/model.onnx or model.onnx (the first the repository has), tokenizer_config.json and
 * special_tokens_map.json when there. `--sha256 FILE=HEX` pins a file's checksum (checked as well
 * as the hub's; a pinned file the hub does not say is then verified all the same):
 *
 *   npx tsx scripts/models/download-embedding.ts --guard <owner/name> --name prompt-guard \
 *     --dir models [--revision REV] [--sha256 onnx/model.onnx=HEX]
 *
 * DIR defaults to $EMBED_MODELS_DIR, else models/embeddings of this repository (where
 * configs/embedding.yaml looks). HF_ENDPOINT changes the hub's address (a mirror). Files are
 * written as `<file>.part` and renamed when complete, after their checksum matches the one the hub
 * sends (`X-Linked-Etag`: SHA-256 of a large file; `ETag`: git blob SHA-1 of a small one); a file
 * the hub sends no checksum for is reported as not verified. Progress is printed in bytes. Where the
 * hub cannot be reached, it stops with the list of files to copy by hand and where to put them;
 * the service never downloads.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream } from 'node:stream/web';
import { parseArgs } from 'node:util';
import type { ModelCard } from '../../plugins/embed/api.ts';
import { MODEL_CARDS, OPTIONAL_FILES, TOKENIZER_FILES } from '../../plugins/embed/model-cards.ts';

export const DEFAULT_MODELS_DIR = resolve(import.meta.dirname, '../../models/embeddings');
/** Where configs/safety-filter.yaml's classifier set looks (`models_dir: ../models`). */
export const DEFAULT_GUARD_DIR = resolve(import.meta.dirname, '../../models');
const CONNECT_TIMEOUT_MS = 20_000;

export class DownloadError extends Error {}

const usage = `usage: npx tsx scripts/models/download-embedding.ts <Name...> | --all | --list  [--dir DIR] [--force]
  Downloads embedding models (plugins/embed/model-cards.ts) from the Hugging Face hub into DIR
  (default $EMBED_MODELS_DIR, else models/embeddings), checking each file's checksum.
  --list    the model names
  --all     every model
  --force   download files that are already there again
  HF_ENDPOINT sets the hub's address (a mirror).
usage: npx tsx scripts/models/download-embedding.ts --guard <owner/name> [--name NAME] [--dir DIR]
         [--revision REV] [--sha256 FILE=HEX]... [--force]
  Downloads a guard model (an ONNX sequence classifier: config.json, tokenizer.json,
  onnx/model.onnx or model.onnx) into DIR/NAME (default models/<name>), for a classifier entry
  {type: ml, format: hf-sequence-classification, model: NAME}. --sha256 pins a file's checksum.
`;

/** MiB with one decimal, for progress lines. */
function mib(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MiB`;
}

/**
 * What the hub says the file's checksum is: `X-Linked-Etag` is the SHA-256 of a file stored in
 * LFS (model weights), `ETag` the git blob SHA-1 of a small file. Undefined when it says neither.
 */
export function expectedChecksum(headers: Headers): { algorithm: 'sha256' | 'git-sha1'; hex: string } | undefined {
  const clean = (v: string | null) => v?.replace(/^W\//, '').replace(/"/g, '').toLowerCase();
  const linked = clean(headers.get('x-linked-etag'));
  if (linked && /^[0-9a-f]{64}$/.test(linked)) return { algorithm: 'sha256', hex: linked };
  const etag = clean(headers.get('etag'));
  if (etag && /^[0-9a-f]{64}$/.test(etag)) return { algorithm: 'sha256', hex: etag };
  if (etag && /^[0-9a-f]{40}$/.test(etag)) return { algorithm: 'git-sha1', hex: etag };
  return undefined;
}

/** Files of a card: required ones (graph, external weights, tokenizer), then optional ones. */
export function cardFiles(card: ModelCard): { required: string[]; optional: string[] } {
  return { required: [card.file, ...card.extraFiles, ...TOKENIZER_FILES], optional: OPTIONAL_FILES };
}

export function fileUrl(endpoint: string, repo: string, file: string, revision = 'main'): string {
  return `${endpoint.replace(/\/$/, '')}/${repo}/resolve/${encodeURIComponent(revision)}/${file}`;
}

/**
 * What to fetch from one repository into `<dir>/<name>/`. A required entry that is a list is a
 * choice: its first file the repository has (a graph at `onnx/model.onnx` or `model.onnx`).
 */
export interface DownloadSpec {
  name: string;
  repo: string;
  revision?: string;
  required: Array<string | string[]>;
  optional: string[];
  /** Pinned SHA-256 per file path: a file that differs is refused whatever the hub says. */
  sha256?: Record<string, string>;
}

/** The files of a guard model (`hf-sequence-classification`, plugins/classify/ml/hf-sequence-classifier.ts). */
export const GUARD_FILES = {
  required: [['onnx/model.onnx', 'model.onnx'], 'tokenizer.json', 'config.json'],
  optional: ['tokenizer_config.json', 'special_tokens_map.json'],
};

export function guardSpec(
  repo: string,
  options: { name?: string; revision?: string; sha256?: Record<string, string> } = {},
): DownloadSpec {
  if (!/^[\w.-]+\/[\w.-]+$/.test(repo)) throw new DownloadError(`--guard expects <owner>/<name>, got ${repo}`);
  return {
    name: options.name ?? repo.split('/')[1],
    repo,
    revision: options.revision,
    required: GUARD_FILES.required,
    optional: GUARD_FILES.optional,
    sha256: options.sha256,
  };
}

/** Downloads one embedding model; returns the files written. Throws DownloadError with what to do by hand. */
export function downloadModel(
  card: ModelCard,
  options: { dir: string; endpoint: string; force?: boolean; log?: (line: string) => void },
): Promise<string[]> {
  return downloadFiles({ name: card.name, repo: card.repo, ...cardFiles(card) }, options);
}

/** Downloads the files of a spec into `<dir>/<name>/`; returns the files written. Throws DownloadError with what to do by hand. */
export async function downloadFiles(
  spec: DownloadSpec,
  options: { dir: string; endpoint: string; force?: boolean; log?: (line: string) => void },
): Promise<string[]> {
  const target = join(options.dir, spec.name);
  const log = options.log ?? (() => {});
  const { required, optional } = spec;
  const pinned = spec.sha256 ?? {};
  const written: string[] = [];
  const named = required.map((r) => (Array.isArray(r) ? r.join(' or ') : r));
  const byHand = () =>
    `copy ${named.join(', ')} (and ${optional.join(', ')} where the repository has them) ` +
    `from https://huggingface.co/${spec.repo} into ${target}, keeping their paths`;
  const entries: Array<{ choices: string[]; optional: boolean }> = [
    ...required.map((r) => ({ choices: Array.isArray(r) ? r : [r], optional: false })),
    ...optional.map((f) => ({ choices: [f], optional: true })),
  ];
  for (const entry of entries) {
    const present = entry.choices.find((f) => existsSync(join(target, f)));
    if (!options.force && present) {
      log(`  ${present}: already there`);
      continue;
    }
    for (const [k, file] of entry.choices.entries()) {
      const last = k === entry.choices.length - 1;
      const result = await fetchFile(spec, file, {
        ...options,
        target,
        byHand,
        pinned: pinned[file],
        missingIsFine: entry.optional || !last,
      });
      if (result === 'missing') {
        log(`  ${file}: not in the repository${entry.optional ? ' (optional)' : ''}`);
        continue;
      }
      written.push(result);
      break;
    }
  }
  return written;
}

/** One file: written (its path), or 'missing' when the hub has none and that is allowed. */
async function fetchFile(
  spec: DownloadSpec,
  file: string,
  options: {
    endpoint: string;
    target: string;
    byHand: () => string;
    pinned?: string;
    missingIsFine: boolean;
    log?: (line: string) => void;
  },
): Promise<string | 'missing'> {
  const { target, byHand } = options;
  const log = options.log ?? (() => {});
  const path = join(target, file);
  const url = fileUrl(options.endpoint, spec.repo, file, spec.revision);
  let response: Response;
  try {
    response = await fetch(url, { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS), redirect: 'follow' });
  } catch (err) {
    const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
    throw new DownloadError(`cannot reach the Hugging Face hub at ${options.endpoint} (${cause}): ${byHand()}`);
  }
  if (response.status === 404 && options.missingIsFine) {
    await response.body?.cancel();
    return 'missing';
  }
  if (!response.ok || !response.body) {
    await response.body?.cancel();
    throw new DownloadError(`${url} answered ${response.status} ${response.statusText}: ${byHand()}`);
  }
  mkdirSync(dirname(path), { recursive: true });
  const part = `${path}.part`;
  const total = Number(response.headers.get('content-length')) || undefined;
  const hub = expectedChecksum(response.headers);
  const pinned = options.pinned?.toLowerCase();
  // A pinned checksum is checked first; the hub's too, when it sends one.
  const checks = [
    ...(pinned ? [{ algorithm: 'sha256' as const, hex: pinned, by: 'pinned' }] : []),
    ...(hub && !(pinned && hub.algorithm === 'sha256' && hub.hex === pinned) ? [{ ...hub, by: 'the hub says' }] : []),
  ];
  const expected = checks.find((c) => c.algorithm === 'git-sha1');
  const sha256 = createHash('sha256');
  // A git blob hash starts with the size: streamed when the hub says the size, which it does.
  const gitSha1 =
    expected?.algorithm === 'git-sha1' && total !== undefined
      ? createHash('sha1').update(`blob ${total}\0`)
      : undefined;
  let received = 0;
  let reported = Date.now();
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      received += chunk.length;
      sha256.update(chunk);
      gitSha1?.update(chunk);
      if (Date.now() - reported >= 2000) {
        reported = Date.now();
        log(
          `  ${file}: ${mib(received)}${total ? ` of ${mib(total)} (${Math.floor((100 * received) / total)}%)` : ''}`,
        );
      }
      done(null, chunk);
    },
  });
  try {
    // The timeout above covers the answer's start; the body of a large file takes what it takes.
    await pipeline(Readable.fromWeb(response.body as ReadableStream), meter, createWriteStream(part));
  } catch (err) {
    rmSync(part, { force: true });
    throw new DownloadError(`download of ${url} failed (${(err as Error).message}): ${byHand()}`);
  }
  let verified = 'not verified (the hub sent no checksum)';
  const digests = { sha256: sha256.digest('hex'), 'git-sha1': received === total ? gitSha1?.digest('hex') : undefined };
  for (const check of checks) {
    // git-sha1: no size announced, or not the size announced, cannot match.
    const actual = digests[check.algorithm];
    if (actual !== check.hex) {
      rmSync(part, { force: true });
      throw new DownloadError(
        `${url}: checksum mismatch (${check.algorithm} ${actual}, ${check.by} ${check.hex}); nothing was kept: ${byHand()}`,
      );
    }
  }
  if (checks.length > 0)
    verified = `${[...new Set(checks.map((c) => `${c.algorithm}${c.by === 'pinned' ? ' (pinned)' : ''}`))].join(', ')} verified`;
  renameSync(part, path);
  log(`  ${file}: written, ${mib(received)}, ${verified}`);
  return path;
}

async function main(): Promise<number> {
  let parsed: ReturnType<typeof parseOptions>;
  try {
    parsed = parseOptions();
  } catch (err) {
    console.error(`download-embedding: ${(err as Error).message.split('. ')[0]}\n${usage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(usage);
    return 0;
  }
  if (values.guard !== undefined) return guard(values);
  if (values.list) {
    for (const c of MODEL_CARDS)
      console.log(`${c.name.padEnd(26)} ${c.repo}/${c.file}  (${c.dimension}, ${c.pooling})`);
    return 0;
  }
  const names = values.all ? MODEL_CARDS.map((c) => c.name) : positionals;
  if (names.length === 0) {
    console.error(usage.trimEnd());
    return 2;
  }
  const unknown = names.filter((n) => !MODEL_CARDS.some((c) => c.name === n));
  if (unknown.length > 0) {
    console.error(`unknown model ${unknown.join(', ')}; --list shows the names`);
    return 2;
  }
  const dir = resolve(values.dir ?? process.env.EMBED_MODELS_DIR ?? DEFAULT_MODELS_DIR);
  const endpoint = process.env.HF_ENDPOINT ?? 'https://huggingface.co';
  for (const name of names) {
    const card = MODEL_CARDS.find((c) => c.name === name)!;
    console.log(`${name}: ${card.repo} → ${join(dir, name)}`);
    try {
      await downloadModel(card, { dir, endpoint, force: values.force, log: (line) => console.log(line) });
    } catch (err) {
      if (!(err instanceof DownloadError)) throw err;
      console.error(`${name}: ${err.message}`);
      return 1;
    }
  }
  return 0;
}

/** `--guard`: one guard model into the classifiers' models directory. */
async function guard(values: ReturnType<typeof parseOptions>['values']): Promise<number> {
  let spec: DownloadSpec;
  try {
    const sha256: Record<string, string> = {};
    for (const pin of values.sha256 ?? []) {
      const m = /^(.+)=([0-9a-fA-F]{64})$/.exec(pin);
      if (!m) throw new DownloadError(`--sha256 expects FILE=<64 hex digits>, got ${pin}`);
      sha256[m[1]] = m[2];
    }
    spec = guardSpec(values.guard ?? '', { name: values.name, revision: values.revision, sha256 });
  } catch (err) {
    console.error(`download-embedding: ${(err as Error).message}`);
    return 2;
  }
  const dir = resolve(values.dir ?? DEFAULT_GUARD_DIR);
  const endpoint = process.env.HF_ENDPOINT ?? 'https://huggingface.co';
  console.log(`${spec.name}: ${spec.repo}${spec.revision ? `@${spec.revision}` : ''} → ${join(dir, spec.name)}`);
  try {
    await downloadFiles(spec, { dir, endpoint, force: values.force, log: (line) => console.log(line) });
  } catch (err) {
    if (!(err instanceof DownloadError)) throw err;
    console.error(`${spec.name}: ${err.message}`);
    return 1;
  }
  return 0;
}

function parseOptions() {
  return parseArgs({
    allowPositionals: true,
    options: {
      guard: { type: 'string' },
      name: { type: 'string' },
      revision: { type: 'string' },
      sha256: { type: 'string', multiple: true },
      dir: { type: 'string' },
      all: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
