/**
 * Bytes to text. The charset comes from, in order: a byte order mark, the Content-Type header's
 * `charset`, for HTML a `<meta charset>` / `<meta http-equiv="Content-Type">` in the first 1024
 * bytes (the HTML prescan window), else UTF-8. Labels are those of the WHATWG Encoding standard,
 * which Node's TextDecoder (full ICU) implements: windows-1252, iso-8859-x, shift_jis, gbk...
 */

/** The `charset` parameter of a Content-Type value, if any. */
export function charsetOf(contentType: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? '');
  return m?.[1];
}

/** The charset an HTML document declares in its first 1024 bytes. */
export function sniffMetaCharset(bytes: Buffer): string | undefined {
  const head = bytes.subarray(0, 1024).toString('latin1');
  const direct = /<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)/i.exec(head);
  return direct?.[1];
}

function bomCharset(bytes: Buffer): { charset: string; skip: number } | undefined {
  if (bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return { charset: 'utf-8', skip: 3 };
  if (bytes[0] === 0xfe && bytes[1] === 0xff) return { charset: 'utf-16be', skip: 2 };
  if (bytes[0] === 0xff && bytes[1] === 0xfe) return { charset: 'utf-16le', skip: 2 };
  return undefined;
}

function decoderFor(label: string | undefined): TextDecoder | undefined {
  if (!label) return undefined;
  try {
    return new TextDecoder(label);
  } catch {
    return undefined; // unknown label: try the next source
  }
}

/** windows-1252 bytes 0x80-0x9F (the rest is ISO-8859-1, i.e. the byte value itself). */
const cp1252High = [
  0x20ac, 0x81, 0x201a, 0x192, 0x201e, 0x2026, 0x2020, 0x2021, 0x2c6, 0x2030, 0x160, 0x2039, 0x152, 0x8d, 0x17d, 0x8f,
  0x90, 0x2018, 0x2019, 0x201c, 0x201d, 0x2022, 0x2013, 0x2014, 0x2dc, 0x2122, 0x161, 0x203a, 0x153, 0x9d, 0x17e, 0x178,
];

/**
 * windows-1252 by hand: Node 20's TextDecoder takes a Latin-1 fast path for this label and turns
 * 0x80-0x9F (€, curly quotes, dashes) into control characters. The WHATWG standard maps the
 * labels latin1, iso-8859-1 and ascii to windows-1252 too, so this covers most legacy pages.
 */
function decodeWindows1252(bytes: Buffer): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 8192) {
    const codes = Array.from(bytes.subarray(i, i + 8192), (b) => (b >= 0x80 && b <= 0x9f ? cp1252High[b - 0x80] : b));
    out += String.fromCharCode(...codes);
  }
  return out;
}

export function decodeText(bytes: Buffer, contentType: string | undefined, html: boolean): string {
  const bom = bomCharset(bytes);
  if (bom) return new TextDecoder(bom.charset).decode(bytes.subarray(bom.skip));
  const meta = html ? sniffMetaCharset(bytes) : undefined;
  // A document that says it is UTF-16 without a BOM is read as UTF-8, as browsers do.
  const fromMeta = meta && !/^utf-?16/i.test(meta) ? meta : undefined;
  const decoder = decoderFor(charsetOf(contentType)) ?? decoderFor(fromMeta) ?? new TextDecoder('utf-8');
  return decoder.encoding === 'windows-1252' ? decodeWindows1252(bytes) : decoder.decode(bytes);
}
