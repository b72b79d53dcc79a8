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
const CONNECT_TIMEOUT_MS = 20_000;

export class DownloadError extends Error {}

const usage = `usage: npx tsx scripts/models/download-embedding.ts <Name...> | --all | --list  [--dir DIR] [--force]
  Downloads embedding models (plugins/embed/model-cards.ts) from the Hugging Face hub into DIR
  (default $EMBED_MODELS_DIR, else models/embeddings), checking each file's checksum.
  --list    the model names
  --all     every model
  --force   download files that are already there again
  HF_ENDPOINT sets the hub's address (a mirror).
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

export function fileUrl(endpoint: string, repo: string, file: string): string {
  return `${endpoint.replace(/\/$/, '')}/${repo}/resolve/main/${file}`;
}

/** Downloads one model; returns the files written. Throws DownloadError with what to do by hand. */
export async function downloadModel(
  card: ModelCard,
  options: { dir: string; endpoint: string; force?: boolean; log?: (line: string) => void },
): Promise<string[]> {
  const target = join(options.dir, card.name);
  const log = options.log ?? (() => {});
  const { required, optional } = cardFiles(card);
  const written: string[] = [];
  const byHand = () =>
    `copy ${required.join(', ')} (and ${optional.join(', ')} where the repository has them) ` +
    `from https://huggingface.co/${card.repo} into ${target}, keeping their paths`;
  for (const file of [...required, ...optional]) {
    const path = join(target, file);
    if (!options.force && existsSync(path)) {
      log(`  ${file}: already there`);
      continue;
    }
    const url = fileUrl(options.endpoint, card.repo, file);
    let response: Response;
    try {
      response = await fetch(url, { signal: AbortSignal.timeout(CONNECT_TIMEOUT_MS), redirect: 'follow' });
    } catch (err) {
      const cause = (err as Error & { cause?: Error }).cause?.message ?? (err as Error).message;
      throw new DownloadError(`cannot reach the Hugging Face hub at ${options.endpoint} (${cause}): ${byHand()}`);
    }
    if (response.status === 404 && optional.includes(file)) {
      await response.body?.cancel();
      log(`  ${file}: not in the repository (optional)`);
      continue;
    }
    if (!response.ok || !response.body) {
      await response.body?.cancel();
      throw new DownloadError(`${url} answered ${response.status} ${response.statusText}: ${byHand()}`);
    }
    mkdirSync(dirname(path), { recursive: true });
    const part = `${path}.part`;
    const total = Number(response.headers.get('content-length')) || undefined;
    const expected = expectedChecksum(response.headers);
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
    if (expected) {
      const actual =
        expected.algorithm === 'sha256'
          ? sha256.digest('hex')
          : received === total
            ? gitSha1?.digest('hex')
            : undefined; // no size announced, or not the size announced: cannot match
      if (actual !== expected.hex) {
        rmSync(part, { force: true });
        throw new DownloadError(
          `${url}: checksum mismatch (${expected.algorithm} ${actual}, the hub says ${expected.hex}); nothing was kept: ${byHand()}`,
        );
      }
      verified = `${expected.algorithm} verified`;
    }
    renameSync(part, path);
    written.push(path);
    log(`  ${file}: written, ${mib(received)}, ${verified}`);
  }
  return written;
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

function parseOptions() {
  return parseArgs({
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      all: { type: 'boolean', default: false },
      list: { type: 'boolean', default: false },
      force: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
