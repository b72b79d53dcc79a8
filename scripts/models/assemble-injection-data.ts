/**
 * Assembles the public part of the prompt-injection / jailbreak corpus (injection-sources.ts) into
 * .data/detect/injection/public.jsonl, with a manifest of sources, licences, commits, checksums
 * and counts (.data/detect/injection/manifest.json).
 *
 *   npx tsx scripts/models/assemble-injection-data.ts [--mirror DIR]
 *
 * Each file is read from the cache .data/sources/<owner>+<name>/<commit>/<path> if there, else
 * from a local copy of the repository: a git directory at <DIR>/<owner>+<name>/repo (the layout
 * of a snapshot mirror) or <DIR>/<owner>+<name> (a clone or bare repository), at the pinned commit
 * (`git show <commit>:<path>`). DIR defaults to $DETECT_MIRROR_DIR, else .data/mirror. To fetch a
 * source by hand: `git clone https://github.com/<owner>/<name> .data/mirror/<owner>+<name>`.
 * A file whose SHA-256 is not the pinned one is refused (the run fails naming it); the copy read
 * is cached, so later runs need no mirror. Nothing here is committed: the texts are other
 * people's, under their licences (listed in the manifest and docs/classifiers.md).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DOCUMENT_SOURCES } from './document-sources.ts';
import { committedCorpus, dedupe, type LabelledText, PUBLIC_CORPUS, ROOT } from './injection-corpus.ts';
import { type BuildContext, publicGenerated, SOURCES, type Source } from './injection-sources.ts';

/** Every public source: the prompts, then the long documents. */
const ALL_SOURCES: Source[] = [...SOURCES, ...DOCUMENT_SOURCES];

const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

function repoDir(mirror: string, repo: string): string | undefined {
  const base = join(mirror, repo.replace('/', '+'));
  for (const dir of [join(base, 'repo'), base]) if (existsSync(dir)) return dir;
  return undefined;
}

/** The pinned bytes of a source file (cache, else mirror), checksum verified. */
export function readPinned(source: Source, path: string, expected: string, mirror: string): string {
  const cache = join(ROOT, '.data/sources', source.repo.replace('/', '+'), source.commit, path);
  let data: Buffer;
  if (existsSync(cache)) data = readFileSync(cache);
  else {
    const dir = repoDir(mirror, source.repo);
    if (!dir) {
      throw new Error(
        `${source.id}: ${source.repo} is not in ${mirror} (expected ${join(mirror, source.repo.replace('/', '+'))}); ` +
          `fetch it (git clone https://github.com/${source.repo}) or pass --mirror`,
      );
    }
    data = execFileSync(
      'git',
      ['--git-dir', existsSync(join(dir, '.git')) ? join(dir, '.git') : dir, 'show', `${source.commit}:${path}`],
      {
        maxBuffer: 64 * 1024 * 1024,
      },
    );
  }
  const actual = sha256(data);
  if (actual !== expected) {
    throw new Error(
      `${source.id}: ${source.repo}@${source.commit.slice(0, 12)}:${path} has SHA-256 ${actual}, pinned ${expected}`,
    );
  }
  if (!existsSync(cache)) {
    mkdirSync(dirname(cache), { recursive: true });
    writeFileSync(cache, data);
  }
  return data.toString('utf8');
}

function counts(items: LabelledText[]) {
  const out: Record<string, Record<string, number>> = {};
  for (const e of items) {
    out[e.source] ??= {};
    for (const k of [`${e.split}`, `${e.category}`, 'total']) out[e.source][k] = (out[e.source][k] ?? 0) + 1;
  }
  return out;
}

function main(): void {
  const { values } = parseArgs({
    options: { mirror: { type: 'string' }, out: { type: 'string', default: PUBLIC_CORPUS } },
  });
  const mirror = resolve(values.mirror ?? process.env.DETECT_MIRROR_DIR ?? join(ROOT, '.data/mirror'));
  const ctx: BuildContext = { goals: [], questions: [] };
  const all: LabelledText[] = [];
  for (const source of ALL_SOURCES) {
    const read = (path: string) => {
      const f = source.files.find((x) => x.path === path);
      if (!f) throw new Error(`${source.id}: ${path} is not a pinned file of the source`);
      return readPinned(source, path, f.sha256, mirror);
    };
    const rows = source.build(read, ctx);
    all.push(...rows);
    console.log(
      `${source.id.padEnd(30)} ${String(rows.length).padStart(5)} examples (${source.repo}@${source.commit.slice(0, 12)}, ${source.licence})`,
    );
  }
  all.push(...publicGenerated(ctx));
  // Texts already in the committed part stay there; duplicates across public sources kept once.
  const committed = new Set(committedCorpus().map((e) => e.text.trim()));
  const rows = dedupe(all).filter((e) => !committed.has(e.text.trim()));
  const out = resolve(values.out ?? PUBLIC_CORPUS);
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);
  const manifest = {
    created_by: 'scripts/models/assemble-injection-data.ts',
    file: { path: out, sha256: sha256(readFileSync(out)), examples: rows.length },
    sources: ALL_SOURCES.map((s) => ({
      id: s.id,
      repo: s.repo,
      commit: s.commit,
      licence: s.licence,
      eval_only: s.evalOnly ?? false,
      description: s.description,
      files: s.files,
    })),
    counts: counts(rows),
  };
  writeFileSync(join(dirname(out), 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  console.log(`wrote ${rows.length} examples to ${out}`);
}

if (import.meta.url === `file://${process.argv[1]}`) main();
