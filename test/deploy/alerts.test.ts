/**
 * The Prometheus alert rules (deploy/prometheus/alerts.yaml) load in Prometheus' own checker and
 * fire as their unit tests (alerts.test.yaml) say, and use only metrics a service exports
 * (checked against a running service in manifests.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { metricNames, yamlDoc } from '../helpers/deploy.ts';
import { promtool, promtoolMissing } from './promtool.ts';

const skip = promtoolMissing !== undefined && process.env.CI !== 'true';
if (skip) console.warn(`${promtoolMissing}: deploy/prometheus rules not checked (required under CI=true)`);

describe.skipIf(skip)('alert rules under promtool', () => {
  it('promtool check rules accepts deploy/prometheus/alerts.yaml', () => {
    if (promtoolMissing) expect.fail(`${promtoolMissing}; CI must provide it`);
    const run = promtool(['check', 'rules', 'deploy/prometheus/alerts.yaml']);
    expect(run.output).toContain('SUCCESS');
    expect(run.ok, run.output).toBe(true);
  });

  it('the alerts fire as deploy/prometheus/alerts.test.yaml expects (promtool test rules)', () => {
    if (promtoolMissing) expect.fail(`${promtoolMissing}; CI must provide it`);
    const run = promtool(['test', 'rules', 'deploy/prometheus/alerts.test.yaml']);
    expect(run.ok, run.output).toBe(true);
  });
});

describe('alert rules', () => {
  const groups = yamlDoc<{ groups: { rules: { alert: string; expr: string; labels: Record<string, string> }[] }[] }>(
    'prometheus/alerts.yaml',
  ).groups;
  const rules = groups.flatMap((g) => g.rules);

  it('every rule names a metric and a severity', () => {
    expect(rules.length).toBeGreaterThanOrEqual(5);
    for (const rule of rules) {
      expect(metricNames(rule.expr), rule.alert).not.toEqual([]);
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
    }
  });
});
