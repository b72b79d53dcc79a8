/**
 * Placeholders and documented example keys: values in a key's shape that are not a secret
 * (`AKIAXXXXXXXXXXXXXXXX`, `sk_live_0000…`, `ghp_abcdef…`, `<your-key>`, `${TOKEN}`, the AWS
 * documentation's `AKIAIOSFODNN7EXAMPLE`). Judged on the random part of a key (its prefix left
 * out); a real key's random part is uniform over its alphabet, which none of these is.
 */

/**
 * Random parts of example keys printed in vendors' documentation (AWS, Stripe, GitHub, Slack):
 * copied into code and prompts everywhere, never valid.
 */
const DOCUMENTED = new Set([
  'IOSFODNN7EXAMPLE', // AWS access key id AKIAIOSFODNN7EXAMPLE
  'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', // AWS secret access key
  '4eC39HqLyjWDarjtT1zdp7dc', // Stripe sk_test_ in the API reference
  'TYooMQauvdEDq54NiTphI7jx', // Stripe pk_test_
  '16C7e42F292c6912E7710c838347Ae178B4a', // GitHub docs
  'AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw', // Telegram Bot API docs
]);

/**
 * Words that mark a value as a stand-in: `your_key_here`, `EXAMPLE`, `xxxx`, `REDACTED`; in one
 * case throughout (a random key holds `XxXx` or `fAKe` now and then, hardly ever `xxxx` or `FAKE`).
 */
const STAND_IN_WORDS = [
  'example',
  'sample',
  'dummy',
  'placeholder',
  'redacted',
  'changeme',
  'your',
  'insert',
  'replace',
  'fake',
  'tokenhere',
  'token_here',
  'keyhere',
  'key_here',
];
const STAND_IN_ALTERNATIVES = STAND_IN_WORDS.flatMap((w) => [
  w,
  w.toUpperCase(),
  w[0]?.toUpperCase() + w.slice(1),
]).join('|');
/** A stand-in word at the start or end of the value or of one of its parts (`your_key`, `…EXAMPLE`), or a run of x. */
const STAND_IN = new RegExp(
  `\\*{3}|xxxxxx|XXXXXX|(?:^|[^A-Za-z0-9])(?:${STAND_IN_ALTERNATIVES})|(?:${STAND_IN_ALTERNATIVES})(?:$|[^A-Za-z0-9])`,
);

/** Whether `random` (a key's random part) is a placeholder or a documented example. */
export function isPlaceholder(random: string): boolean {
  for (const example of DOCUMENTED) if (random.endsWith(example)) return true;
  if (STAND_IN.test(random)) return true;
  if (/[<{$]/.test(random[0] ?? '')) return true; // <your-key>, ${VAR}, {{var}}, $VAR
  const s = /^[A-Za-z0-9]*$/.test(random) ? random : random.replace(/[^A-Za-z0-9]/g, '');
  const distinct = distinctChars(s);
  if (s.length < 8) return s.length === 0 || distinct <= 1;
  if (distinct < Math.min(8, Math.max(4, Math.ceil(s.length / 6)))) return true; // aaaa, abab, 0101…
  return sequential(s) || periodic(s);
}

/** A table reused by distinctChars (no allocation per key: many keys in a text are judged). */
const SEEN = new Uint8Array(128);

/** How many different characters an ASCII string holds. */
function distinctChars(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) & 127;
    if (SEEN[c] === 0) {
      SEEN[c] = 1;
      n++;
    }
  }
  for (let i = 0; i < s.length; i++) SEEN[s.charCodeAt(i) & 127] = 0;
  return n;
}

/**
 * Mostly steps of -1, 0 or +1 between neighbours (`abcdef…`, `0123456789`, `zyxw`, `aaaa`):
 * at least 60% of them (a uniform random string of digits has 30% of such steps, hex 19%,
 * base62 5%); or a run of 8 characters counting up, down or repeating anywhere
 * (`…admin01234567890`, `…admin00000000`).
 */
function sequential(s: string): boolean {
  let steps = 0;
  let run = 1; // characters in the current run counting up or down by one
  let last = 0; // the step before
  for (let i = 1; i < s.length; i++) {
    const d = s.charCodeAt(i) - s.charCodeAt(i - 1);
    if (d >= -1 && d <= 1) steps++;
    const counting = d >= -1 && d <= 1; // up, down, or the same character again
    run = counting && d === last ? run + 1 : counting ? 2 : 1;
    last = d;
    if (run >= 8) return true; // a random digit string holds 8 in a row about once in 10^7
  }
  return steps >= 0.6 * (s.length - 1);
}

/** A short unit repeated (`a1B2c3a1B2c3…`): a period of at most 16 over at least three periods. */
function periodic(s: string): boolean {
  for (let p = 1; p <= 16 && 3 * p <= s.length; p++) {
    let i = p;
    while (i < s.length && s.charCodeAt(i) === s.charCodeAt(i - p)) i++;
    if (i === s.length) return true;
  }
  return false;
}
