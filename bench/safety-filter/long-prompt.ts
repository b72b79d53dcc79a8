/**
 * `npx tsx bench/safety-filter/long-prompt.ts`: what a long prompt costs the *other* requests.
 * The shipped safety filter (its own process, the dev tenant's classifiers: Tier A and the model)
 * gets one chat of N characters of ordinary text at a time, while a short chat is sent every 5 ms
 * on another connection; printed: the slowest short chat's latency during the long ones, against
 * the slowest with no long prompt in the same run (the baseline), and the long chat's own time
 * and status (a build whose classifiers refuse the text answers 400).
 * A long prompt that holds the event loop shows as short chats waiting for it.
 *
 * Env: LONG_SIZES (characters, comma-separated; default 262144,1048576,4000000), LONG_ROUNDS (3),
 * LONG_SENTENCE (what the long text repeats; e.g. one with an e-mail address: a finding per sentence),
 * LONG_ANSWER=1 (the long text is a streamed answer sent as one delta: see longChat).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { startNodeServer, waitUntilReady } from '../common/harness.ts';
import { markdownTable } from '../common/markdown-table.ts';
import { start } from '../typed-proxy/children.ts';
import { filterSets, writeBenchTenants } from './filter-setup.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'switchyard-long-'));
const key = 'sk-dev-local-0001';
const sizes = (process.env.LONG_SIZES ?? '262144,1048576,4000000').split(',').map(Number);
const rounds = Number(process.env.LONG_ROUNDS ?? 3);
const sentence =
  process.env.LONG_SENTENCE ?? 'The weather report says it will be sunny with light winds along the coast. ';

const backend = await startNodeServer(join(root, 'bench/safety-filter/backend.ts'), {}, undefined);
// The shipped dev tenant's classifiers (Tier A and the model), a token limit no run reaches.
const tenants = writeBenchTenants(dir, key, 'llm', ['pii', 'secrets', 'prompt_injection', 'injection_model'], 1e12);
const { port, sets } = await filterSets(backend.port);
const filter = start(
  process.execPath,
  ['bin/switchyard.js', 'serve', 'configs/safety-filter.yaml', ...sets.flatMap((s) => ['--set', s])],
  {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', FILTER_TENANTS_FILE: tenants, FILTER_AUDIT_PATH: join(dir, 'audit.db') },
  },
);
const url = `http://127.0.0.1:${port}`;
const shortPool = new Pool(url, { connections: 1 });
const longPool = new Pool(url, { connections: 1 });

/** A chat's time and status (a short one must be answered: 200). `body`: another request body. */
async function chat(pool: Pool, content: string, body?: unknown): Promise<{ ms: number; status: number }> {
  const started = performance.now();
  const res = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body ?? { model: 'gpt-4o-mini', messages: [{ role: 'user', content }] }),
  });
  await res.body.text();
  if (res.statusCode !== 200 && content.length < 1000) throw new Error(`status ${res.statusCode} for a short chat`);
  return { ms: performance.now() - started, status: res.statusCode };
}

/**
 * LONG_ANSWER=1: the long text is the answer instead, streamed by the backend as one delta of N
 * characters with an e-mail address in its first sentence (model `paced-0-N-N-pii`).
 */
const longAnswer = process.env.LONG_ANSWER === '1';
function longChat(size: number, content: string) {
  if (!longAnswer) return chat(longPool, content);
  const model = `paced-0-${size}-${size}-pii`;
  return chat(longPool, content, { model, stream: true, messages: [{ role: 'user', content: 'a long answer' }] });
}

/** Short chats every 5 ms until `until` settles: the slowest one's latency. */
async function shortChatsDuring(until: Promise<unknown>): Promise<number> {
  let done = false;
  void until.finally(() => {
    done = true;
  });
  let worst = 0;
  while (!done) {
    const [{ ms }] = await Promise.all([chat(shortPool, 'What is the weather like in Lisbon?'), sleep(5)]);
    worst = Math.max(worst, ms);
  }
  return worst;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

await waitUntilReady(filter, 'filter', 90_000, () => chat(shortPool, 'hello'));
const rows: string[][] = [];
for (let r = 0; r < rounds; r++) {
  const baseline = await shortChatsDuring(sleep(1000));
  for (const size of sizes) {
    const content = sentence.repeat(Math.ceil(size / sentence.length)).slice(0, size);
    let longMs = 0;
    let status = 0;
    const long = longChat(size, content).then((r) => {
      longMs = r.ms;
      status = r.status;
    });
    const worst = await shortChatsDuring(long);
    await long;
    rows.push([
      String(r + 1),
      String(size),
      String(status),
      longMs.toFixed(0),
      worst.toFixed(1),
      baseline.toFixed(1),
      (worst / baseline).toFixed(2),
    ]);
  }
}
console.log(
  markdownTable(
    ['round', 'prompt chars', 'status', 'long chat ms', 'slowest short chat ms', 'baseline ms (no long chat)', 'ratio'],
    ['right', 'right', 'right', 'right', 'right', 'right', 'right'],
    rows,
  ).join('\n'),
);
await Promise.all([shortPool.close(), longPool.close()]);
filter.child.kill('SIGTERM');
backend.s.child.kill('SIGTERM');
