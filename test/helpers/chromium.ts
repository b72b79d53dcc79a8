/**
 * Headless Chromium for browser tests: Debian's /usr/bin/chromium (CHROMIUM_PATH to change it)
 * driven by playwright-core. `missing` says why a browser test cannot run; under CI=true that is a
 * failure (see requireBrowser), elsewhere the suite skips with the reason shown.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
/** As the machine's probe starts it: no sandbox (root), no network beyond the page's own. */
const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const playwright = await import('playwright-core').catch(() => undefined);

/** Why no browser test can run here, or undefined when one can. */
export const missing: string | undefined = !existsSync(CHROMIUM)
  ? `no Chromium at ${CHROMIUM} (apt-get install chromium)`
  : !playwright
    ? 'playwright-core is not installed'
    : undefined;

/** Call at the top of a browser test file: fails under CI=true when no browser can run, else warns. */
export function requireBrowser(file: string): void {
  if (missing && process.env.CI === 'true') {
    it('a browser is available (required when CI=true)', () => {
      expect.fail(`browser test cannot run: ${missing}`);
    });
  } else if (missing) {
    console.warn(`${file} skipped: ${missing}`);
  }
}

/** A persistent headless Chromium context with its profile under `dir`. */
export function launchChromium(dir: string): Promise<import('playwright-core').BrowserContext> {
  if (!playwright) throw new Error(missing);
  return playwright.chromium.launchPersistentContext(join(dir, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
  });
}
