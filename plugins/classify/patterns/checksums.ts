/**
 * Check digits and measures the detectors use to tell a real identifier from a look-alike.
 */

/** Luhn (mod 10) check of a string of digits, as used by payment cards. */
export function luhnValid(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i--) {
    let d = digits.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return false;
    if (double) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
    double = !double;
  }
  return digits.length > 0 && sum % 10 === 0;
}

/**
 * ISO 13616 IBAN check: the first four characters moved to the end, letters replaced by 10..35,
 * the number mod 97 must be 1. `iban` is upper-case alphanumerics without spaces.
 */
export function ibanChecksumValid(iban: string): boolean {
  const rearranged = iban.slice(4) + iban.slice(0, 4);
  let rest = 0;
  for (let i = 0; i < rearranged.length; i++) {
    const c = rearranged.charCodeAt(i);
    if (c >= 48 && c <= 57) rest = (rest * 10 + (c - 48)) % 97;
    else if (c >= 65 && c <= 90) rest = (rest * 100 + (c - 55)) % 97;
    else return false;
  }
  return rest === 1;
}

/** IBAN length per country (ISO 13616 registry); a country not listed is not an IBAN country. */
export const IBAN_LENGTHS: ReadonlyMap<string, number> = new Map(
  (
    'AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21 CR22 CY28 CZ24 DE22 DJ27 DK18 ' +
    'DO28 EE20 EG29 ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IQ23 ' +
    'IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20 LV21 LY25 MC27 MD24 ME22 MK19 MN20 MR27 MT31 ' +
    'MU30 NI28 NL18 NO15 OM23 PK24 PL28 PS29 PT25 QA29 RO24 RS22 RU33 SA24 SC31 SD18 SE24 SI19 SK24 ' +
    'SM27 SO23 ST25 SV28 TL23 TN24 TR26 UA29 VA22 VG24 XK20 YE30'
  )
    .split(' ')
    .map((e): [string, number] => [e.slice(0, 2), Number(e.slice(2))]),
);

const DNI_LETTERS = 'TRWAGMYFPDXBNJZSQVHLCKE';

/**
 * Spanish DNI / NIE control letter: the number (an NIE's leading X, Y, Z read as 0, 1, 2) mod 23
 * indexes a fixed alphabet. `id` is upper-case, e.g. `12345678Z` or `X1234567L`.
 */
export function spanishIdValid(id: string): boolean {
  const prefix = 'XYZ'.indexOf(id[0]);
  const digits = prefix >= 0 ? prefix + id.slice(1, -1) : id.slice(0, -1);
  if (!/^\d{8}$/.test(digits)) return false;
  return DNI_LETTERS[Number(digits) % 23] === id[id.length - 1];
}

/**
 * US Social Security Number ranges the SSA never issues: area 000, 666 or 900-999, group 00,
 * serial 0000, plus numbers published in advertising and voided (078-05-1120, 219-09-9999).
 */
export function ssnValid(area: string, group: string, serial: string): boolean {
  if (area === '000' || area === '666' || area[0] === '9') return false;
  if (group === '00' || serial === '0000') return false;
  const whole = area + group + serial;
  return whole !== '078051120' && whole !== '219099999';
}

/**
 * UK National Insurance number prefix rules (HMRC): first letter not D, F, I, Q, U or V; second
 * not D, F, I, O, Q, U or V; and BG, GB, KN, NK, NT, TN, ZZ are never allocated. The number has
 * no check digit; the suffix is A-D.
 */
export function ninoPrefixValid(prefix: string): boolean {
  if ('DFIQUV'.includes(prefix[0]) || 'DFIOQUV'.includes(prefix[1])) return false;
  return !['BG', 'GB', 'KN', 'NK', 'NT', 'TN', 'ZZ'].includes(prefix);
}

/** Shannon entropy in bits per character: random keys score high, words and placeholders low. */
export function shannonEntropy(s: string): number {
  if (s.length === 0) return 0;
  const counts = new Map<number, number>();
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  let h = 0;
  for (const n of counts.values()) {
    const p = n / s.length;
    h -= p * Math.log2(p);
  }
  return h;
}

// ---------------------------------------------------------------- key checksums

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** CRC-32 (IEEE 802.3) of a string's UTF-16 code units taken as bytes (keys are ASCII). */
export function crc32(s: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < s.length; i++) crc = (crc >>> 8) ^ (CRC_TABLE[(crc ^ s.charCodeAt(i)) & 0xff] as number);
  return (crc ^ 0xffffffff) >>> 0;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * The 6-character checksum of GitHub's (2021) and npm's token formats: the CRC-32 of the random
 * part in base 62 (digits, upper case, lower case), left-padded with `0`
 * (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/).
 */
export function base62Crc32(random: string): string {
  let n = crc32(random);
  let out = '';
  while (n > 0) {
    out = BASE62[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out.padStart(6, '0');
}

/** `prefix` + 30 random characters + their base62Crc32: a GitHub classic or npm token's check. */
export function base62TokenValid(token: string, prefixLength: number): boolean {
  const random = token.slice(prefixLength, -6);
  return random.length === 30 && base62Crc32(random) === token.slice(-6);
}

const BECH32 = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';

function bech32Polymod(values: number[]): number {
  const gen = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= gen[i] as number;
  }
  return chk >>> 0;
}

function hrpExpand(hrp: string): number[] {
  const out: number[] = [];
  for (let i = 0; i < hrp.length; i++) out.push(hrp.charCodeAt(i) >> 5);
  out.push(0);
  for (let i = 0; i < hrp.length; i++) out.push(hrp.charCodeAt(i) & 31);
  return out;
}

/** BIP-173 bech32 check of `hrp1data` (either case, not mixed), as age's secret keys carry. */
export function bech32Valid(s: string): boolean {
  const lower = s.toLowerCase();
  if (lower !== s && s.toUpperCase() !== s) return false;
  const sep = lower.lastIndexOf('1');
  if (sep < 1 || lower.length - sep < 7) return false;
  const data: number[] = [];
  for (const c of lower.slice(sep + 1)) {
    const v = BECH32.indexOf(c);
    if (v < 0) return false;
    data.push(v);
  }
  return bech32Polymod([...hrpExpand(lower.slice(0, sep)), ...data]) === 1;
}

/** The 6 checksum characters that make `hrp1data` valid bech32 (for generated keys). */
export function bech32Checksum(hrp: string, data: string): string {
  const values = [...hrpExpand(hrp.toLowerCase()), ...[...data.toLowerCase()].map((c) => BECH32.indexOf(c))];
  const mod = bech32Polymod([...values, 0, 0, 0, 0, 0, 0]) ^ 1;
  let out = '';
  for (let i = 0; i < 6; i++) out += BECH32[(mod >>> (5 * (5 - i))) & 31];
  return out;
}
