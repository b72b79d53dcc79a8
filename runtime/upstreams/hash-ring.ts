/**
 * A consistent-hash ring (ketama style): each endpoint owns `160 * weight` points on a 32-bit
 * circle; a key belongs to the first point at or after its hash. The same key maps to the same
 * endpoint while the set is unchanged, and an endpoint leaving (down, ejected) moves only the
 * keys it held, each to the next endpoint along the ring. Hand-written (no kept npm ring fits:
 * `hashring` hashes with md5 per lookup and is not installed); the hash is FNV-1a with murmur3's
 * finaliser, cheap and well spread for short ids.
 */

const pointsPerWeight = 160;

export class HashRing {
  /** Sorted point hashes and, at the same index, the endpoint owning each point. */
  private readonly points: Uint32Array;
  private readonly owners: Uint16Array;

  constructor(weights: readonly number[]) {
    const all: Array<[number, number]> = [];
    weights.forEach((w, i) => {
      for (let v = 0; v < pointsPerWeight * w; v++) all.push([hash32(`${i}#${v}`), i]);
    });
    // Ties (rare) broken by endpoint, so the ring does not depend on insertion order.
    all.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.points = Uint32Array.from(all, (p) => p[0]);
    this.owners = Uint16Array.from(all, (p) => p[1]);
  }

  /** The endpoint owning `key`: the first along the ring from its hash that `usable` accepts. */
  lookup(key: string, usable: (i: number) => boolean): number {
    const n = this.points.length;
    const start = this.search(hash32(key));
    for (let k = 0; k < n; k++) {
      const owner = this.owners[(start + k) % n] as number;
      if (usable(owner)) return owner;
    }
    throw new Error('hash ring: no usable endpoint');
  }

  /** Index of the first point >= h (wrapping to 0). */
  private search(h: number): number {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.points[mid] as number) < h) lo = mid + 1;
      else hi = mid;
    }
    return lo === this.points.length ? 0 : lo;
  }
}

/** FNV-1a over UTF-16 code units, then murmur3's fmix32 for avalanche. */
export function hash32(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
