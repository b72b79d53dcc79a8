/**
 * A model hub's answer for one file, as the Hugging Face hub sends it: an LFS file's (`.onnx`)
 * SHA-256 in X-Linked-Etag, a small file's git blob SHA-1 in ETag. `lie` replaces the SHA-256 (a
 * test of the download's checksum check).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';

export function sendHubFile(res: ServerResponse, file: string, lie?: string): void {
  const body = readFileSync(file);
  const checksum = file.endsWith('.onnx')
    ? { 'x-linked-etag': `"${lie ?? createHash('sha256').update(body).digest('hex')}"` }
    : { etag: `"${createHash('sha1').update(`blob ${body.length}\0`).update(body).digest('hex')}"` };
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length, ...checksum });
  res.end(body);
}
