// Renders k8s/ with `kubectl kustomize` and checks the properties the
// cluster shape depends on. Skips (saying why) only when kubectl is absent.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { before, describe, test } from "node:test";
import { parseAllDocuments } from "yaml";
import { restrictedViolations } from "./pod-security.ts";
import type { KubeObject } from "./resources.ts";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const hasKubectl = spawnSync("kubectl", ["version", "--client"], { stdio: "ignore" }).status === 0;
const skip = hasKubectl ? false : "kubectl is not installed (CI installs it: see k8s/README.md)";

describe("k8s/ manifests (kubectl kustomize)", { skip }, () => {
  let objects: KubeObject[];
  const find = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata?.name === name);
    assert.ok(o, `${kind}/${name} is rendered`);
    return o;
  };
  const podSpecOf = (o: KubeObject): KubeObject =>
    o.kind === "CronJob" ? o.spec.jobTemplate.spec.template.spec : o.spec.template.spec;
  const workloads = () => objects.filter((o) => ["Deployment", "Job", "CronJob"].includes(o.kind));

  before(() => {
    const yaml = execFileSync("kubectl", ["kustomize", `${root}k8s`], { encoding: "utf8" });
    // A plain YAML parser: client-node's loaders rename fields (from → _from).
    objects = parseAllDocuments(yaml).map((d) => d.toJSON() as KubeObject);
  });

  test("identity, agents, compute and the runtime router each have a Deployment and a Service in the platform namespace", () => {
    for (const name of ["identity", "agents", "compute", "runtime-router"]) {
      const d = find("Deployment", name);
      find("Service", name);
      assert.equal(d.metadata.namespace, "agent-platform");
    }
    assert.deepEqual(
      find("Service", "identity")
        .spec.ports.map((p: KubeObject) => p.port)
        .sort(),
      [50051, 8081],
    );
  });

  test("the namespace enforces restricted Pod Security and every workload's pod passes it", () => {
    assert.equal(
      find("Namespace", "agent-platform").metadata.labels["pod-security.kubernetes.io/enforce"],
      "restricted",
    );
    for (const w of workloads()) {
      assert.deepEqual(restrictedViolations(podSpecOf(w)), [], `${w.kind}/${w.metadata.name}`);
      for (const c of podSpecOf(w).containers)
        assert.equal(c.securityContext.readOnlyRootFilesystem, true, `${w.metadata.name}/${c.name} read-only root`);
    }
  });

  test("secrets are references to platform-secrets, never values", () => {
    const env = (name: string) => podSpecOf(find("Deployment", name)).containers[0].env as KubeObject[];
    const ref = (list: KubeObject[], key: string) => list.find((e) => e.name === key)?.valueFrom?.secretKeyRef;
    assert.deepEqual(ref(env("identity"), "DATABASE_URL"), { name: "platform-secrets", key: "DATABASE_URL" });
    assert.deepEqual(ref(env("identity"), "IDENTITY_AUTHKEY_KEK"), {
      name: "platform-secrets",
      key: "IDENTITY_AUTHKEY_KEK",
    });
    assert.equal(ref(env("agents"), "DATABASE_URL")?.name, "platform-secrets");
    assert.equal(objects.filter((o) => o.kind === "Secret").length, 0, "no Secret objects are shipped");
    for (const o of objects.filter((x) => x.kind === "ConfigMap")) {
      for (const k of Object.keys(o.data ?? {}))
        assert.ok(!/KEK|PASSWORD|DATABASE_URL|API_KEY|TOKEN|SECRET/.test(k), `ConfigMap ${o.metadata.name} holds ${k}`);
    }
  });

  test("operators' settings: every service reads METRICS_TOKEN from platform-secrets and has an OTLP endpoint setting; workers get both", () => {
    const deployments: [string, string][] = [
      ["identity", "identity-config"],
      ["agents", "agents-config"],
      ["compute", "compute-config"],
      ["runtime-router", "runtime-router-config"],
    ];
    for (const [name, config] of deployments) {
      const container = podSpecOf(find("Deployment", name)).containers[0];
      const token = (container.env as KubeObject[]).find((e) => e.name === "METRICS_TOKEN");
      assert.deepEqual(
        token?.valueFrom?.secretKeyRef,
        { name: "platform-secrets", key: "METRICS_TOKEN", optional: true },
        `${name}: METRICS_TOKEN from the Secret, optional (unset: /metrics not served)`,
      );
      assert.ok(
        (container.envFrom as KubeObject[]).some((e) => e.configMapRef?.name === config),
        `${name} reads ${config}`,
      );
      assert.equal(find("ConfigMap", config).data.OTEL_EXPORTER_OTLP_ENDPOINT, "", `${config}: empty exports nothing`);
    }
    const agents = podSpecOf(find("Deployment", "agents")).containers[0].env as KubeObject[];
    assert.deepEqual(agents.find((e) => e.name === "AGENTS_SECRETS_KEY")?.valueFrom?.secretKeyRef, {
      name: "platform-secrets",
      key: "AGENTS_SECRETS_KEY",
      optional: true,
    });
    const t = JSON.parse(find("ConfigMap", "runtime-worker-template").data["worker-template.json"]);
    assert.deepEqual(t.secretEnv.METRICS_TOKEN, { secret: "platform-secrets", key: "METRICS_TOKEN" });
    assert.equal(t.env.METRICS_TOKEN, undefined, "never a value in the template");
  });

  test("a migrations Job and the compute GC CronJob exist", () => {
    const job = find("Job", "platform-migrations");
    assert.match(podSpecOf(job).containers[0].command.join(" "), /packages\/identity\/src\/migrate-command\.ts/);
    assert.equal(
      podSpecOf(job).containers[0].env.find((e: KubeObject) => e.name === "MIGRATION_DB_URL")?.valueFrom?.secretKeyRef
        ?.name,
      "platform-secrets",
    );
    const gc = find("CronJob", "compute-gc");
    assert.equal(gc.spec.concurrencyPolicy, "Forbid");
    assert.equal(podSpecOf(gc).serviceAccountName, "compute-gc");
    assert.match(podSpecOf(gc).containers[0].command.join(" "), /drivers\/kubernetes\/gc-command\.ts/);
  });

  test("RBAC: compute may manage pods, pods/exec and PVCs; the router deployments, deployments/scale and services", () => {
    const rules = (name: string) => find("Role", name).rules as KubeObject[];
    const can = (role: string, resource: string, verb: string) =>
      rules(role).some((r) => r.resources.includes(resource) && r.verbs.includes(verb));
    for (const [res, verbs] of [
      ["pods", ["create", "get", "delete"]],
      ["pods/exec", ["create", "get"]],
      ["persistentvolumeclaims", ["create", "patch", "delete", "list"]],
    ] as const) {
      for (const v of verbs) assert.ok(can("compute", res, v), `compute ${v} ${res}`);
    }
    for (const [res, verbs] of [
      ["deployments", ["create", "get", "list", "patch", "delete"]],
      ["deployments/scale", ["patch"]],
      ["services", ["create", "delete"]],
    ] as const) {
      for (const v of verbs) assert.ok(can("runtime-router", res, v), `router ${v} ${res}`);
    }
    assert.ok(!can("runtime-router", "pods/exec", "create"));
    assert.ok(!rules("compute-gc").some((r) => r.resources.includes("pods")));
    const sa = (dep: string) => podSpecOf(find("Deployment", dep));
    assert.equal(sa("compute").serviceAccountName, "compute");
    assert.equal(sa("identity").automountServiceAccountToken, false);
    assert.equal(sa("agents").automountServiceAccountToken, false);
  });

  test("NetworkPolicy: identity's gRPC port admits only the agents pods (and the router, for VerifyJWT); ingress is denied by default", () => {
    const deny = find("NetworkPolicy", "default-deny-ingress");
    assert.deepEqual(deny.spec.podSelector, {});
    assert.deepEqual(deny.spec.ingress ?? [], []);
    const np = find("NetworkPolicy", "identity");
    assert.deepEqual(np.spec.podSelector.matchLabels, { "app.kubernetes.io/name": "identity" });
    const grpcRules = (np.spec.ingress as KubeObject[]).filter(
      (r) => !r.ports || r.ports.some((p: KubeObject) => p.port === 50051),
    );
    assert.equal(grpcRules.length, 1, "one rule covers port 50051");
    const from = grpcRules[0].from as KubeObject[];
    assert.ok(from?.length, "the gRPC rule names its peers");
    for (const peer of from) {
      assert.equal(peer.namespaceSelector, undefined);
      assert.equal(peer.ipBlock, undefined);
    }
    const names = from.map((p) => p.podSelector?.matchLabels?.["app.kubernetes.io/name"]).sort();
    assert.deepEqual(names, ["agents", "runtime-router"]);
    // The agents pods carry that label.
    assert.equal(find("Deployment", "agents").spec.template.metadata.labels["app.kubernetes.io/name"], "agents");
    // Sandboxes get no ingress and no egress at all: their one way out is their own NetworkPolicy to the proxy.
    const sb = find("NetworkPolicy", "sandboxes");
    assert.deepEqual(sb.spec.policyTypes.sort(), ["Egress", "Ingress"]);
    assert.equal(sb.spec.ingress, undefined);
    assert.equal(sb.spec.egress, undefined);
  });

  test("egress proxy (issue 21): its Deployment, Service and NetworkPolicy; sandboxes reach only it, it reaches no platform service", () => {
    const d = find("Deployment", "egress-proxy");
    assert.equal(d.spec.replicas, 1, "one replica: events are numbered per sandbox in its memory");
    const pod = podSpecOf(d);
    assert.equal(pod.automountServiceAccountToken, false);
    const c = pod.containers[0];
    assert.deepEqual(c.command, ["node", "--import", "tsx", "packages/compute/src/egress/main.ts"]);
    const env = Object.fromEntries((c.env as KubeObject[]).map((e) => [e.name, e.value ?? e.valueFrom]));
    assert.equal(env.EGRESS_PROXY_KEY_FILE, "/etc/platform/egress/key");
    assert.equal(env.DATABASE_URL.secretKeyRef.key, "DATABASE_URL");
    const config = find("ConfigMap", "egress-proxy-config").data;
    assert.equal(config.HOST, "0.0.0.0");
    assert.equal(config.EGRESS_PROXY_PORT, "3128");
    // compute points sandboxes at the Service and shares the key (the same Secret mounted in both).
    assert.equal(find("ConfigMap", "compute-config").data.COMPUTE_EGRESS_PROXY_ADDRESS, "egress-proxy:3128");
    const secretOf = (p: KubeObject) => p.volumes.find((v: KubeObject) => v.name === "egress-key")?.secret?.secretName;
    assert.equal(secretOf(pod), "egress-proxy-key");
    assert.equal(secretOf(podSpecOf(find("Deployment", "compute"))), "egress-proxy-key");
    const svc = find("Service", "egress-proxy");
    assert.deepEqual(svc.spec.selector, { "app.kubernetes.io/name": "egress-proxy" });
    assert.equal(svc.spec.ports[0].port, 3128);
    // The labels the per-sandbox NetworkPolicy (drivers/kubernetes/egress-policy.ts) selects are the proxy pods'.
    assert.equal(d.spec.template.metadata.labels["app.kubernetes.io/name"], "egress-proxy");
    // compute may manage the sandboxes' NetworkPolicies; the proxy has no API access.
    const rules = find("Role", "compute").rules as KubeObject[];
    const np = rules.find((r) => r.resources.includes("networkpolicies"));
    assert.deepEqual(np?.apiGroups, ["networking.k8s.io"]);
    assert.ok(["create", "delete"].every((v) => np?.verbs.includes(v)));
    assert.equal(find("ServiceAccount", "egress-proxy").automountServiceAccountToken, false);

    const policy = find("NetworkPolicy", "egress-proxy");
    assert.deepEqual(policy.spec.podSelector.matchLabels, { "app.kubernetes.io/name": "egress-proxy" });
    assert.deepEqual(policy.spec.policyTypes.sort(), ["Egress", "Ingress"]);
    // Ingress: sandbox pods only, on 3128 only.
    assert.equal(policy.spec.ingress.length, 1);
    const [ing] = policy.spec.ingress;
    assert.deepEqual(ing.from, [
      {
        podSelector: {
          matchLabels: { "app.kubernetes.io/managed-by": "compute", "app.kubernetes.io/component": "sandbox" },
        },
      },
    ]);
    assert.deepEqual(ing.ports, [{ protocol: "TCP", port: 3128 }]);
    // Egress: no rule names a platform pod or port, and every address rule excludes the private and link-local ranges.
    const platformPorts = [8080, 8081, 8082, 50051, 50052, 50053];
    for (const rule of policy.spec.egress as KubeObject[]) {
      for (const p of rule.ports ?? []) assert.ok(!platformPorts.includes(p.port), `port ${p.port}`);
      for (const to of rule.to ?? []) {
        if (to.podSelector) assert.deepEqual(to.podSelector.matchLabels, { "k8s-app": "kube-dns" });
        if (to.ipBlock?.cidr === "0.0.0.0/0")
          for (const r of [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "169.254.0.0/16",
            "100.64.0.0/10",
            "127.0.0.0/8",
          ])
            assert.ok(to.ipBlock.except.includes(r), r);
        if (to.ipBlock?.cidr === "::/0")
          for (const r of ["fc00::/7", "fe80::/10", "::1/128"]) assert.ok(to.ipBlock.except.includes(r), r);
        if (to.ipBlock) assert.ok(["0.0.0.0/0", "::/0"].includes(to.ipBlock.cidr), to.ipBlock.cidr);
      }
      // A rule without `to` (any address) is allowed only for the database's port.
      if (!rule.to) assert.deepEqual(rule.ports, [{ protocol: "TCP", port: 5432 }]);
    }
  });

  test("every entry point the manifests and the worker template run exists in the repository", () => {
    const commands = workloads().flatMap((w) => podSpecOf(w).containers.map((c: KubeObject) => c.command as string[]));
    commands.push(JSON.parse(find("ConfigMap", "runtime-worker-template").data["worker-template.json"]).command);
    for (const command of commands) {
      const script = command.find((a: string) => a.endsWith(".ts"));
      assert.ok(script, `a TypeScript entry point in ${command.join(" ")}`);
      assert.ok(existsSync(`${root}${script}`), `${script} exists`);
    }
  });

  test("mTLS: each service mounts its own certificate Secret (cert-manager layout) and its TLS_* settings name the files", () => {
    for (const name of ["identity", "agents", "compute", "runtime-router"]) {
      const pod = podSpecOf(find("Deployment", name));
      const c = pod.containers[0];
      const env = Object.fromEntries((c.env as KubeObject[]).map((e) => [e.name, e.value]));
      assert.deepEqual(
        [env.TLS_CA_FILE, env.TLS_CERT_FILE, env.TLS_KEY_FILE],
        ["/etc/platform/tls/ca.crt", "/etc/platform/tls/tls.crt", "/etc/platform/tls/tls.key"],
        `${name} TLS_* settings`,
      );
      assert.deepEqual(
        c.volumeMounts.find((m: KubeObject) => m.name === "tls"),
        { name: "tls", mountPath: "/etc/platform/tls", readOnly: true },
        name,
      );
      const secret = pod.volumes.find((v: KubeObject) => v.name === "tls")?.secret;
      assert.equal(secret?.secretName, `${name}-tls`, `${name} mounts its own Secret`);
      assert.equal(secret?.defaultMode, 0o440, `${name}: the key is not world-readable`);
      assert.equal(
        pod.securityContext.fsGroup,
        pod.securityContext.runAsGroup,
        `${name} reads the Secret through its group`,
      );
    }
    // Internal gRPC URLs are https; the kubelet's probes cannot present a client certificate.
    assert.match(find("ConfigMap", "agents-config").data.IDENTITY_GRPC_URL, /^https:\/\/identity:50051$/);
    assert.match(find("ConfigMap", "agents-config").data.COMPUTE_GRPC_URL, /^https:\/\/compute:50051$/);
    assert.match(find("ConfigMap", "runtime-router-config").data.IDENTITY_GRPC_URL, /^https:\/\//);
    const compute = podSpecOf(find("Deployment", "compute")).containers[0];
    assert.equal(compute.readinessProbe.grpc, undefined);
    assert.deepEqual(compute.readinessProbe.tcpSocket, { port: "grpc" });
    const t = JSON.parse(find("ConfigMap", "runtime-worker-template").data["worker-template.json"]);
    assert.equal(t.tlsSecretName, "runtime-worker-tls");
    assert.equal(t.env.AGENTS_GRPC_URL, `https://agents:${find("ConfigMap", "agents-config").data.AGENTS_GRPC_PORT}`);
  });

  test("NetworkPolicy: agents' internal gRPC port admits only tenant workers; its REST port stays public", () => {
    const agents = find("Deployment", "agents");
    const grpcPort = podSpecOf(agents).containers[0].ports.find((p: KubeObject) => p.name === "grpc")?.containerPort;
    assert.equal(String(grpcPort), find("ConfigMap", "agents-config").data.AGENTS_GRPC_PORT);
    assert.ok(
      find("Service", "agents").spec.ports.some((p: KubeObject) => p.port === grpcPort && p.appProtocol === "grpc"),
    );
    const rules = find("NetworkPolicy", "agents").spec.ingress as KubeObject[];
    const grpcRules = rules.filter((r) => !r.ports || r.ports.some((p: KubeObject) => p.port === grpcPort));
    assert.equal(grpcRules.length, 1, "one rule covers the internal port");
    assert.deepEqual(
      grpcRules[0].from.map((p: KubeObject) => p.podSelector?.matchLabels),
      [{ "app.kubernetes.io/name": "runtime-worker" }],
    );
    const rest = rules.find((r) => r.ports?.some((p: KubeObject) => p.port === 8082));
    assert.equal(rest?.from, undefined, "REST/SSE from anywhere (behind the ingress)");
  });

  test("the cert-manager overlay: a self-signed CA issuer and one Certificate per Secret the workloads mount", () => {
    const yaml = execFileSync("kubectl", ["kustomize", `${root}k8s/cert-manager`], { encoding: "utf8" });
    const all = parseAllDocuments(yaml).map((d) => d.toJSON() as KubeObject);
    const certs = all.filter((o) => o.kind === "Certificate");
    const issuer = (name: string) => all.find((o) => o.kind === "Issuer" && o.metadata.name === name);
    assert.deepEqual(issuer("platform-selfsigned")?.spec, { selfSigned: {} });
    const ca = certs.find((c) => c.metadata.name === "platform-ca");
    assert.equal(ca?.spec.isCA, true);
    assert.equal(ca?.spec.issuerRef.name, "platform-selfsigned");
    assert.equal(issuer("platform-ca")?.spec.ca.secretName, ca?.spec.secretName);
    // Every Secret a workload or the worker template mounts is made by a Certificate of that CA.
    const mounted = all
      .filter((o) => o.kind === "Deployment")
      .flatMap((d) => podSpecOf(d).volumes.map((v: KubeObject) => v.secret?.secretName))
      // The egress proxy's credential key is no certificate: the operator makes it (k8s/README.md).
      .filter((name) => name && name !== "egress-proxy-key");
    const workerTemplate = all.find((o) => o.kind === "ConfigMap" && o.metadata.name === "runtime-worker-template");
    mounted.push(JSON.parse(workerTemplate?.data["worker-template.json"]).tlsSecretName);
    assert.deepEqual(mounted.sort(), [
      "agents-tls",
      "compute-tls",
      "identity-tls",
      "runtime-router-tls",
      "runtime-worker-tls",
    ]);
    for (const secretName of mounted) {
      const name = secretName.replace(/-tls$/, "");
      const c = certs.find((x) => x.spec.secretName === secretName);
      assert.ok(c, `a Certificate writes ${secretName}`);
      assert.equal(c.metadata.namespace, "agent-platform");
      assert.equal(c.spec.issuerRef.name, "platform-ca");
      // The name the internal servers admit callers by.
      assert.equal(c.spec.commonName, name);
      assert.deepEqual(c.spec.uris, [`spiffe://platform/${name}`]);
      assert.ok(c.spec.usages.includes("server auth") && c.spec.usages.includes("client auth"), `${name} usages`);
    }
    // The names clients dial: the Service name (https://identity:50051) and its cluster DNS names.
    for (const name of ["identity", "compute", "agents"]) {
      const c = certs.find((x) => x.metadata.name === name);
      assert.ok(
        c?.spec.dnsNames.includes(name) && c.spec.dnsNames.includes(`${name}.agent-platform.svc.cluster.local`),
        `${name} DNS names`,
      );
    }
    const operator = certs.find((c) => c.metadata.name === "operator");
    assert.deepEqual(
      operator?.spec.usages.filter((u: string) => u.endsWith(" auth")),
      ["client auth"],
    );
  });

  test("the tenant worker template is a ConfigMap with a JSON WorkerTemplate the router mounts", () => {
    const cm = find("ConfigMap", "runtime-worker-template");
    const t = JSON.parse(cm.data["worker-template.json"]);
    assert.equal(typeof t.image, "string");
    assert.deepEqual(t.command.slice(-1), ["packages/runtime/src/worker/main.ts"]);
    assert.ok(t.resources.limits.memory);
    const router = podSpecOf(find("Deployment", "runtime-router"));
    assert.equal(
      router.volumes.find((v: KubeObject) => v.name === "worker-template")?.configMap?.name,
      "runtime-worker-template",
    );
    const cfg = find("ConfigMap", "runtime-router-config");
    assert.equal(cfg.data.RUNTIME_WORKER_TEMPLATE, "/etc/runtime/worker-template.json");
  });
});
