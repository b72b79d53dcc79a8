/**
 * The deployment files checked against the schemas their tools apply, with no cluster or
 * container engine needed: compose.yaml against the official Compose Specification schema
 * (vendored in test/fixtures/compose-spec, Apache-2.0), every Kubernetes manifest against the
 * Kubernetes API's OpenAPI schema of its kind (the `kubernetes-models` package: types, required
 * fields and enums, as the API server checks them; like the OpenAPI schema it does not reject
 * unknown fields, which the server's strict field validation would), and the kustomization
 * rendered by `kubectl kustomize` where kubectl is installed.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { deployDir, root, yamlDoc, yamlDocs } from '../helpers/deploy.ts';

const composeSchema = JSON.parse(readFileSync(join(root, 'test/fixtures/compose-spec/compose-spec.json'), 'utf8'));

function composeValidator() {
  const ajv = new Ajv({ strict: false, allErrors: true });
  // The specification's meta-schema line names draft-07 by a URL ajv knows under another spelling.
  const { $schema: _meta, ...schema } = composeSchema;
  return ajv.compile(schema);
}

interface KubernetesObject {
  apiVersion: string;
  kind: string;
  [key: string]: unknown;
}

/** The kubernetes-models class of an object's apiVersion and kind. */
async function model(o: KubernetesObject): Promise<new (data: unknown) => { validate(): void }> {
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : [undefined, o.apiVersion];
  const path = `kubernetes-models/${group ? `${group}/` : ''}${version}/${o.kind}`;
  const mod = (await import(path)) as Record<string, new (data: unknown) => { validate(): void }>;
  const ctor = mod[o.kind] ?? mod.default;
  if (!ctor) throw new Error(`no model for ${o.apiVersion} ${o.kind}`);
  return ctor;
}

const manifests = (yamlDoc<{ resources: string[] }>('kubernetes/kustomization.yaml').resources ?? []).flatMap((file) =>
  yamlDocs(`kubernetes/${file}`).map((doc) => ({ file, doc: doc as KubernetesObject })),
);

describe('deploy/compose.yaml', () => {
  it('is valid under the Compose Specification schema', () => {
    const validate = composeValidator();
    const compose = yamlDoc('compose.yaml');
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true);
  });

  it('the schema check catches a misspelt key (so it is not vacuous)', () => {
    const validate = composeValidator();
    const compose = yamlDoc<{ services: Record<string, Record<string, unknown>> }>('compose.yaml');
    const [name, service] = Object.entries(compose.services)[0]!;
    compose.services[name] = { ...service, healthchek: service.healthcheck };
    expect(validate(compose)).toBe(false);
    expect(JSON.stringify(validate.errors)).toContain('healthchek');
  });
});

describe('deploy/kubernetes', () => {
  it('lists manifests of the kinds the deployment needs', () => {
    expect(manifests.map((m) => m.doc.kind).sort()).toEqual(
      ['ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Service'].sort(),
    );
  });

  for (const { file, doc } of manifests) {
    it(`${file}: ${doc.kind} is valid under the Kubernetes API schema`, async () => {
      const Model = await model(doc);
      expect(() => new Model(doc).validate()).not.toThrow();
    });
  }

  it('the Kubernetes schema check catches a wrong type and a missing field (so it is not vacuous)', async () => {
    type DeploymentDoc = KubernetesObject & {
      spec: { replicas: unknown; template: { spec: { containers: Array<Record<string, unknown>> } } };
    };
    const original = manifests.find((m) => m.doc.kind === 'Deployment')!.doc as DeploymentDoc;
    const Model = await model(original);
    const wrongType = structuredClone(original);
    wrongType.spec.replicas = 'two';
    expect(() => new Model(wrongType).validate()).toThrow(/replicas/);
    const unnamed = structuredClone(original);
    delete unnamed.spec.template.spec.containers[0]!.name;
    expect(() => new Model(unnamed).validate()).toThrow(/name/);
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' }).status === 0;
  if (!kubectl) console.warn('kubectl kustomize check skipped: kubectl is not installed');
  it.skipIf(!kubectl)('kubectl kustomize renders the kustomization to the same objects', () => {
    const out = spawnSync('kubectl', ['kustomize', join(deployDir, 'kubernetes')], { encoding: 'utf8' });
    expect(out.status, out.stderr).toBe(0);
    const rendered = parseAllDocuments(out.stdout).map((d) => d.toJS() as KubernetesObject);
    expect(rendered.map((o) => `${o.kind}`).sort()).toEqual(manifests.map((m) => m.doc.kind).sort());
  });
});
