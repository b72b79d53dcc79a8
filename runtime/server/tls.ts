/**
 * TLS material of the main listener (`listen.tls: { cert, key }`): PEM files, paths relative to
 * the config file's directory. Empty strings mean "no TLS", so a config can default them to `""`
 * from an unset variable. A missing or unreadable file, or a key that does not fit the
 * certificate, is a config error naming the field, found when the service is built.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import { ConfigError } from '../config/source.ts';
import type { TlsMaterial } from './listener.ts';

export interface TlsConfig {
  cert?: string;
  key?: string;
}

/** The files' contents, or undefined when TLS is off (both paths empty or absent). */
export function loadTlsMaterial(tls: TlsConfig | undefined, configDir: string, file: string): TlsMaterial | undefined {
  const certPath = tls?.cert ?? '';
  const keyPath = tls?.key ?? '';
  if (certPath === '' && keyPath === '') return undefined;
  const problem = (field: string, message: string) =>
    new ConfigError([{ file, line: 0, column: 0, path: `listen.tls.${field}`, message }]);
  if (certPath === '') throw problem('cert', 'required when listen.tls.key is set (or leave both empty for no TLS)');
  if (keyPath === '') throw problem('key', 'required when listen.tls.cert is set (or leave both empty for no TLS)');
  const read = (field: 'cert' | 'key', path: string): Buffer => {
    const full = resolve(configDir, path);
    try {
      return readFileSync(full);
    } catch (err) {
      throw problem(field, `cannot read ${full}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
  const material = { cert: read('cert', certPath), key: read('key', keyPath) };
  try {
    // Parses both and checks that the key belongs to the certificate.
    createSecureContext(material);
  } catch (err) {
    throw problem('cert', `unusable certificate or key: ${(err as Error).message}`);
  }
  return material;
}
