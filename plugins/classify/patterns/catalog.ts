/**
 * Every Tier A detector, by family, and how a classifier's `detectors:` list (family names and
 * detector ids) selects them.
 */
import type { Detector, Family } from './detector.ts';
import { FAMILIES } from './detector.ts';
import { hiddenUnicodeDetectors } from './hidden-unicode.ts';
import { injectionDetectors } from './injection.ts';
import { instructionMarkupDetectors } from './instruction-markup.ts';
import { jailbreakDetectors } from './jailbreak.ts';
import { piiDetectors } from './pii.ts';
import { secretDetectors } from './secrets.ts';

export const DETECTORS: readonly Detector[] = [
  ...piiDetectors,
  ...secretDetectors,
  ...injectionDetectors,
  ...jailbreakDetectors,
  ...hiddenUnicodeDetectors,
  ...instructionMarkupDetectors,
];

/** Labels a classifier reports by default: when a family's detectors fire, and when nothing does. */
export const FAMILY_LABELS: Record<Family, { positive: string; negative: string }> = {
  pii: { positive: 'pii', negative: 'clean' },
  secrets: { positive: 'secret', negative: 'clean' },
  prompt_injection: { positive: 'injection', negative: 'benign' },
  jailbreak: { positive: 'jailbreak', negative: 'benign' },
  hidden_text: { positive: 'hidden_text', negative: 'clean' },
};

/**
 * Former detector ids, each now several provider formats (key-formats.ts): a `detectors:` list
 * naming one selects them all.
 */
export const DETECTOR_ALIASES: Readonly<Record<string, readonly string[]>> = {
  github_token: [
    'github_pat',
    'github_oauth',
    'github_user_to_server',
    'github_app_installation',
    'github_refresh',
    'github_fine_grained_pat',
  ],
  slack_token: [
    'slack_bot_token',
    'slack_user_token',
    'slack_workspace_token',
    'slack_legacy_token',
    'slack_legacy_bot_token',
    'slack_refresh_token',
    'slack_rotated_token',
    'slack_app_token',
    'slack_webhook',
    'slack_workflow_webhook',
  ],
  stripe_key: ['stripe_secret_key', 'stripe_restricted_key'],
};

/** Names accepted in a `detectors:` list: the families, every detector id, and the former ids. */
export const DETECTOR_NAMES: readonly string[] = [
  ...FAMILIES,
  ...DETECTORS.map((d) => d.id),
  ...Object.keys(DETECTOR_ALIASES),
];

/** The detectors a list of family names and detector ids selects, each once, in catalog order. */
export function selectDetectors(names: readonly string[]): Detector[] {
  const wanted = new Set<string>();
  for (const name of names) {
    const family = (FAMILIES as readonly string[]).includes(name);
    const ids = DETECTOR_ALIASES[name] ?? [name];
    const matching = DETECTORS.filter((d) => (family ? d.family === name : ids.includes(d.id)));
    if (matching.length === 0) {
      throw new Error(
        `unknown detector "${name}" (families: ${FAMILIES.join(', ')}; detectors: ${DETECTORS.map((d) => d.id).join(', ')})`,
      );
    }
    for (const d of matching) wanted.add(d.id);
  }
  return DETECTORS.filter((d) => wanted.has(d.id));
}
