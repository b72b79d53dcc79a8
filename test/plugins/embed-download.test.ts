/**
 * scripts/models/download-embedding.ts: against a local stand-in for the Hugging Face hub (the
 * `<repo>/resolve/main/<file>` paths, serving a generated tiny model) it lays the files out as the
 * service reads them, and the model then loads; against an unreachable hub it fails with exit
 * code 1 and says which files to put where.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingModels } from '../../plugins/embed/api.ts';
import { MODEL_CARDS } from '../../plugins/embed/model-cards.ts';
import modelsResource from '../../plugins/embed/models-resource.ts';
import type { ResourceInstance } from '../../runtime/index.ts';
import { createTestEnv } from '../../runtime/testing.ts';
import { downloadModel } from '../../scripts/models/download-embedding.ts';
import { cosine, generateTinyModel, type TinyModel } from '../fixtures/embed-stages.ts';
import { sendHubFile } from '../helpers/fake-hub.ts';
import { closeNow, freePort, listenLocal } from '../helpers/servers.ts';

const SCRIPT = resolve(import.meta.dirname, '../../scripts/models/download-embedding.ts');
const card = MODEL_CARDS.find((c) => c.name === 'BGESmallENV15')!;

let dir: string;
let source: TinyModel;
let hub: Server;
let hubUrl: string;
const requests: string[] = [];
/** A wrong SHA-256 the stand-in hub announces for the model file, when set. */
let lie: string | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'embed-download-'));
  source = generateTinyModel(join(dir, 'source'), 'tiny', { seed: 41 });
  // The repository as the hub has it: onnx/model.onnx, tokenizer files, no special_tokens_map.json.
  const files: Record<string, string> = {
    'onnx/model.onnx': source.model,
    'tokenizer.json': join(source.dir, 'tokenizer.json'),
    'tokenizer_config.json': join(source.dir, 'tokenizer_config.json'),
    'config.json': join(source.dir, 'config.json'),
  };
  hub = createServer((req, res) => {
    requests.push(req.url ?? '');
    const prefix = `/${card.repo}/resolve/main/`;
    const file = req.url?.startsWith(prefix) ? files[req.url.slice(prefix.length)] : undefined;
    if (!file) {
      res.writeHead(404);
      res.end('Entry not found');
      return;
    }
    sendHubFile(res, file, lie);
  });
  hubUrl = await listenLocal(hub);
});

afterAll(() => {
  if (hub) closeNow(hub);
  rmSync(dir, { recursive: true, force: true });
});

describe('download-embedding', () => {
  it('checks every file against the checksum the hub sends, and keeps nothing that differs', async () => {
    const modelsDir = join(dir, 'checked');
    const lines: string[] = [];
    await downloadModel(card, { dir: modelsDir, endpoint: hubUrl, log: (l) => lines.push(l) });
    expect(lines).toContainEqual(expect.stringMatching(/onnx\/model\.onnx: written, \d+\.\d MiB, sha256 verified$/));
    expect(lines).toContainEqual(expect.stringMatching(/tokenizer\.json: written, \d+\.\d MiB, git-sha1 verified$/));

    lie = 'a'.repeat(64);
    try {
      const other = join(dir, 'lied-to');
      await expect(downloadModel(card, { dir: other, endpoint: hubUrl })).rejects.toThrow(/checksum mismatch/);
      expect(existsSync(join(other, 'BGESmallENV15', 'onnx', 'model.onnx'))).toBe(false);
      expect(existsSync(join(other, 'BGESmallENV15', 'onnx', 'model.onnx.part'))).toBe(false);
    } finally {
      lie = undefined;
    }
  });

  it('--help answers with the usage, exit 0', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, '--help'], { encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^usage: /);
  });

  it('writes the repository’s files under <dir>/<Name>/ and the model loads from there', async () => {
    const modelsDir = join(dir, 'models');
    const written = await downloadModel(card, { dir: modelsDir, endpoint: hubUrl });
    expect(written.map((p) => p.slice(modelsDir.length + 1)).sort()).toEqual([
      'BGESmallENV15/config.json',
      'BGESmallENV15/onnx/model.onnx',
      'BGESmallENV15/tokenizer.json',
      'BGESmallENV15/tokenizer_config.json',
    ]);
    expect(existsSync(join(modelsDir, 'BGESmallENV15', 'special_tokens_map.json'))).toBe(false);
    expect(requests).toContain(`/${card.repo}/resolve/main/special_tokens_map.json`);

    // Files already there are not fetched again.
    const before = requests.length;
    expect(await downloadModel(card, { dir: modelsDir, endpoint: hubUrl })).toEqual([]);
    expect(requests.length - before).toBe(1); // only the optional file the hub does not have

    const resource = (await modelsResource.create(
      { models_dir: modelsDir, models: { BGESmallENV15: { dimension: 32 } } } as never,
      createTestEnv(),
    )) as ResourceInstance<EmbeddingModels>;
    try {
      const [vector] = await resource.value.embed('BGESmallENV15', ['downloaded and loaded']);
      const expected = source.reference.embed(source.ids('downloaded and loaded'), 'cls');
      expect(cosine(vector, expected)).toBeGreaterThanOrEqual(0.99999);
    } finally {
      await resource.close?.();
    }
  });

  it('a missing required file fails naming the URL and what to copy by hand', async () => {
    const other = MODEL_CARDS.find((c) => c.name === 'AllMiniLML6V2')!;
    await expect(downloadModel(other, { dir: join(dir, 'models'), endpoint: hubUrl })).rejects.toThrow(
      `${hubUrl}/Qdrant/all-MiniLM-L6-v2-onnx/resolve/main/model.onnx answered 404 Not Found: copy model.onnx, tokenizer.json`,
    );
  });

  it('the command fails clearly (exit 1) where the hub cannot be reached', async () => {
    const port = await freePort(); // nothing listens there
    const target = join(dir, 'unreachable');
    const run = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, 'BGESmallENV15', '--dir', target], {
      env: { ...process.env, HF_ENDPOINT: `http://127.0.0.1:${port}` },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`BGESmallENV15: cannot reach the Hugging Face hub at http://127.0.0.1:${port}`);
    expect(run.stderr).toContain(
      `copy onnx/model.onnx, tokenizer.json (and tokenizer_config.json, config.json, special_tokens_map.json where the repository has them) from https://huggingface.co/Xenova/bge-small-en-v1.5 into ${join(target, 'BGESmallENV15')}`,
    );
  });

  it('--list names every model; an unknown name is refused', () => {
    const list = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, '--list'], { encoding: 'utf8' });
    expect(list.status).toBe(0);
    expect(list.stdout.trim().split('\n')).toHaveLength(22);
    const unknown = spawnSync(process.execPath, ['--import', 'tsx', SCRIPT, 'Nope'], { encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain('unknown model Nope');
  });
});
