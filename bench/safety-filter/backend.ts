/**
 * Benchmark backend: the OpenAI-compatible test fixture (test/helpers/openai-backend.ts) as its
 * own process, recording nothing, listening like the other benchmark servers (`listening <port>`).
 *
 * Env: PORT (0 = ephemeral), CHUNK_SIZE (characters per streamed delta, default 16).
 */
import { createServer } from 'node:http';
import { openAiHandler } from '../../test/helpers/openai-backend.ts';
import { serveForBench } from '../typed-proxy/serve.ts';

const chunkSize = Number(process.env.CHUNK_SIZE) || 16;
serveForBench(createServer({ keepAlive: true }, openAiHandler({ record: false, chunkSize })));
