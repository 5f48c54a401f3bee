import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { KubeDouble, restrictedViolations } from "@platform/kube-testing";
import { Annotation, Label, MANAGED_BY } from "../../controller/labels.ts";
import { orchestratorContract } from "../../testing/orchestrator-contract.ts";
import { isNotFound, isTransient } from "../orchestrator.ts";
import { KubernetesOrchestrator, loadWorkerTemplate } from "./kubernetes-orchestrator.ts";
import { buildDeployment } from "./manifests.ts";

const template = {
  image: "registry.example/runtime-worker:1",
  command: ["node", "--import", "tsx", "packages/runtime/src/worker/main.ts"],
  env: { AGENTS_GRPC_URL: "https://agents:50051" },
};

let double: KubeDouble;
before(async () => {
  double = await KubeDouble.start({ namespaces: ["platform"], runContainers: false });
});
after(() => double?.close());

orchestratorContract(
  "kubernetes (API-server double)",
  () => new KubernetesOrchestrator({ kubeConfig: double.kubeConfig("platform"), namespace: "platform", template }),
);

describe("kubernetes orchestrator: objects on the cluster", () => {
  const tenant = "0b7c3f9e-1111-4222-8333-444455556666";
  const spec = {
    name: "runtime-t-0b7c3f9e",
    replicas: 1,
    labels: { [Label.tenant]: "true", [Label.managedBy]: MANAGED_BY },
    annotations: { [Annotation.tenantShort]: "0b7c3f9e", [Annotation.tenantId]: tenant, [Annotation.orgId]: tenant },
    serviceAnnotations: { [Annotation.tenantId]: tenant },
    env: { TENANT_ID: tenant, ORG_ID: tenant },
  };
  let orch: KubernetesOrchestrator;
  before(async () => {
    orch = new KubernetesOrchestrator({ kubeConfig: double.kubeConfig("platform"), namespace: "platform", template });
    await orch.createDeployment(spec);
  });

  test("the Deployment carries the spec's labels and annotations, env, port 50051, the TLS Secret mount and a port readiness probe", () => {
    const d = double.get("deployments", "platform", spec.name);
    assert.ok(d);
    assert.equal(d.metadata.labels[Label.tenant], "true");
    assert.equal(d.metadata.labels[Label.managedBy], "runtime-controller");
    assert.equal(d.metadata.annotations[Annotation.tenantId], tenant);
    assert.equal(d.metadata.annotations[Annotation.tenantShort], "0b7c3f9e");
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    assert.deepEqual(Object.fromEntries(c.env.map((e: { name: string; value: string }) => [e.name, e.value])), {
      HOST: "0.0.0.0",
      AGENTS_GRPC_URL: "https://agents:50051",
      TENANT_ID: tenant,
      ORG_ID: tenant,
      TLS_CA_FILE: "/etc/platform/tls/ca.crt",
      TLS_CERT_FILE: "/etc/platform/tls/tls.crt",
      TLS_KEY_FILE: "/etc/platform/tls/tls.key",
    });
    assert.equal(c.ports[0].containerPort, 50051);
    assert.deepEqual(c.command, template.command);
    assert.equal(c.volumeMounts.find((m: { mountPath: string }) => m.mountPath === "/tmp")?.name, "tmp");
    // cert-manager's Certificate Secret layout (tls.crt, tls.key, ca.crt), read-only, the key not world-readable.
    assert.deepEqual(
      c.volumeMounts.find((m: { name: string }) => m.name === "tls"),
      { name: "tls", mountPath: "/etc/platform/tls", readOnly: true },
    );
    assert.deepEqual(pod.volumes.find((v: { name: string }) => v.name === "tls")?.secret, {
      secretName: "runtime-worker-tls",
      defaultMode: 0o440,
    });
    assert.equal(pod.securityContext.fsGroup, 10001);
    // The kubelet cannot present a client certificate: the probe checks the bound port.
    assert.deepEqual(c.readinessProbe.tcpSocket, { port: 50051 });
    assert.equal(c.readinessProbe.grpc, undefined);
    assert.equal(pod.automountServiceAccountToken, false);
    assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
    // The namespace enforces restricted Pod Security: worker pods must pass it.
    assert.deepEqual(restrictedViolations(pod), []);
  });

  test("the Service shares the name, selects the pods and carries tenant-id; the endpoint is its cluster DNS name", async () => {
    const s = double.get("services", "platform", spec.name);
    assert.ok(s);
    assert.equal(s.metadata.annotations[Annotation.tenantId], tenant);
    assert.deepEqual(s.spec.selector, double.get("deployments", "platform", spec.name)?.spec.selector.matchLabels);
    assert.equal(s.spec.ports[0].port, 50051);
    assert.equal(await orch.endpoint(spec.name), `https://${spec.name}.platform.svc.cluster.local:50051`);
  });

  test("scaling goes through deployments/scale; last-seen through a strategic merge patch; sweeps list by label selector", async () => {
    const before = double.requests.length;
    await orch.scaleDeployment(spec.name, 0);
    await orch.patchAnnotations(spec.name, { [Annotation.lastSeenAt]: "2026-01-01T00:00:00Z" });
    await orch.listDeployments({ [Label.tenant]: "true", [Label.managedBy]: MANAGED_BY });
    const calls = double.requests.slice(before);
    assert.match(calls[0].path, /\/deployments\/runtime-t-0b7c3f9e\/scale$/);
    assert.equal(calls[0].method, "PATCH");
    assert.equal(calls[1].contentType, "application/strategic-merge-patch+json");
    assert.match(
      decodeURIComponent(calls[2].path),
      /labelSelector=runtime\.platform\.io\/tenant=true,app\.kubernetes\.io\/managed-by=runtime-controller/,
    );
    const d = double.get("deployments", "platform", spec.name);
    assert.equal(d?.spec.replicas, 0);
    assert.equal(d?.metadata.annotations[Annotation.lastSeenAt], "2026-01-01T00:00:00Z");
  });

  test("readyReplicas comes from the Deployment status", async () => {
    await orch.scaleDeployment(spec.name, 1);
    assert.equal((await orch.getDeployment(spec.name))?.readyReplicas, 1);
  });

  test("delete removes both objects; a missing one is not_found for scale; an unreachable server is transient", async () => {
    await orch.deleteDeployment(spec.name);
    assert.equal(double.get("deployments", "platform", spec.name), undefined);
    assert.equal(double.get("services", "platform", spec.name), undefined);
    await assert.rejects(orch.scaleDeployment(spec.name, 1), isNotFound);
    const dead = await KubeDouble.start({ runContainers: false });
    const kc = dead.kubeConfig();
    await dead.close();
    const unreachable = new KubernetesOrchestrator({ kubeConfig: kc, namespace: "default", template });
    await assert.rejects(unreachable.getDeployment("x"), isTransient);
  });
});

describe("kubernetes orchestrator: worker TLS", () => {
  const spec = {
    name: "runtime-t-0b7c3f9e",
    replicas: 1,
    labels: {},
    annotations: {},
    serviceAnnotations: {},
    env: { TENANT_ID: "0b7c3f9e-1111-4222-8333-444455556666", ORG_ID: "0b7c3f9e-1111-4222-8333-444455556666" },
  };
  const envOf = (d: ReturnType<typeof buildDeployment>) =>
    Object.fromEntries((d.spec?.template.spec?.containers[0]?.env ?? []).map((e) => [e.name, e.value]));

  test("the template names the Secret; its env cannot turn TLS off or move the certificate files", () => {
    const d = buildDeployment(spec, {
      ...template,
      tlsSecretName: "workers-cert",
      env: { ...template.env, INTERNAL_TLS: "off", TLS_CERT_FILE: "/elsewhere.crt" },
    });
    assert.equal(d.spec?.template.spec?.volumes?.find((v) => v.name === "tls")?.secret?.secretName, "workers-cert");
    const env = envOf(d);
    assert.equal(env.INTERNAL_TLS, undefined);
    assert.equal(env.TLS_CERT_FILE, "/etc/platform/tls/tls.crt");
  });

  test("internalTls: false (development clusters) mounts no Secret, sets INTERNAL_TLS=off, probes gRPC and gives http endpoints", async () => {
    const d = buildDeployment(spec, template, { internalTls: false });
    const pod = d.spec?.template.spec;
    assert.equal(
      pod?.volumes?.find((v) => v.name === "tls"),
      undefined,
    );
    assert.equal(envOf(d).INTERNAL_TLS, "off");
    assert.equal(envOf(d).TLS_CERT_FILE, undefined);
    assert.deepEqual(pod?.containers[0]?.readinessProbe?.grpc, { port: 50051, service: "runtime.v1.RuntimeService" });
    const plain = new KubernetesOrchestrator({
      kubeConfig: double.kubeConfig("platform"),
      namespace: "platform",
      template,
      internalTls: false,
    });
    await plain.createDeployment({ ...spec, name: "runtime-t-plain" });
    assert.equal(await plain.endpoint("runtime-t-plain"), "http://runtime-t-plain.platform.svc.cluster.local:50051");
    await plain.deleteDeployment("runtime-t-plain");
  });

  test("operators' settings: the router's OTEL_* env reaches the worker over the template's; secretEnv is a secretKeyRef, never a value", async () => {
    const d = buildDeployment(
      spec,
      {
        ...template,
        env: { ...template.env, OTEL_EXPORTER_OTLP_ENDPOINT: "http://template:4318" },
        secretEnv: { METRICS_TOKEN: { secret: "platform-secrets", key: "METRICS_TOKEN" } },
      },
      { env: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" } },
    );
    const env = d.spec?.template.spec?.containers[0]?.env ?? [];
    assert.equal(envOf(d).OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318", "the router's endpoint wins");
    const token = env.find((e) => e.name === "METRICS_TOKEN");
    assert.equal(token?.value, undefined);
    assert.deepEqual(token?.valueFrom?.secretKeyRef, {
      name: "platform-secrets",
      key: "METRICS_TOKEN",
      optional: true,
    });
    // Through the orchestrator: what the API server receives.
    const orchestrator = new KubernetesOrchestrator({
      kubeConfig: double.kubeConfig("platform"),
      namespace: "platform",
      template: { ...template, secretEnv: { METRICS_TOKEN: { secret: "platform-secrets", key: "METRICS_TOKEN" } } },
      workerEnv: { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" },
    });
    await orchestrator.createDeployment({ ...spec, name: "runtime-t-otel" });
    try {
      const stored = double.get("deployments", "platform", "runtime-t-otel") as unknown as ReturnType<
        typeof buildDeployment
      >;
      const storedEnv = stored.spec?.template.spec?.containers[0]?.env ?? [];
      assert.equal(storedEnv.find((e) => e.name === "OTEL_EXPORTER_OTLP_ENDPOINT")?.value, "http://collector:4318");
      assert.equal(storedEnv.find((e) => e.name === "METRICS_TOKEN")?.valueFrom?.secretKeyRef?.key, "METRICS_TOKEN");
    } finally {
      await orchestrator.deleteDeployment("runtime-t-otel");
    }
  });

  test("a worker template file with a malformed secretEnv entry is refused", async () => {
    const dir = await mkdtemp(join(tmpdir(), "worker-template-"));
    try {
      const path = join(dir, "t.json");
      await writeFile(path, JSON.stringify({ ...template, secretEnv: { METRICS_TOKEN: { secret: "" } } }));
      assert.throws(() => loadWorkerTemplate(path), /secretEnv\.METRICS_TOKEN/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a worker template file with an empty tlsSecretName is refused", async () => {
    const dir = await mkdtemp(join(tmpdir(), "worker-template-"));
    try {
      const path = join(dir, "t.json");
      await writeFile(path, JSON.stringify({ ...template, tlsSecretName: "" }));
      assert.throws(() => loadWorkerTemplate(path), /tlsSecretName/);
      await writeFile(path, JSON.stringify({ ...template, tlsSecretName: "mine" }));
      assert.equal(loadWorkerTemplate(path).tlsSecretName, "mine");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
