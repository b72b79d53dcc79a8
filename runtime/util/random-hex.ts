/**
 * Random hex ids from a pooled buffer of CSPRNG bytes. `crypto.randomBytes` per id costs a
 * syscall-backed OpenSSL call (with a fork check) each time; trace and span ids are needed on
 * every request, so the bytes are drawn 4 KiB at a time and sliced.
 */
import { randomFillSync } from 'node:crypto';

const pool = Buffer.allocUnsafe(4096);
let offset = pool.length;

/** `bytes` random bytes as lowercase hex (2 × bytes characters); bytes ≤ 64. */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const hex = pool.toString('hex', offset, offset + bytes);
  offset += bytes;
  return hex;
}
