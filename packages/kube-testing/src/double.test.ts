// The double's API semantics, seen through @kubernetes/client-node as the
// adapters see them.
import assert from "node:assert/strict";
import { Readable, Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import {
  AppsV1Api,
  CoreV1Api,
  Exec,
  NetworkingV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Status,
} from "@kubernetes/client-node";
import { WebSocket } from "ws";
import { KubeDouble } from "./double.ts";

const ns = "default";
let double: KubeDouble;
let core: CoreV1Api;
let apps: AppsV1Api;
let net: NetworkingV1Api;

before(async () => {
  double = await KubeDouble.start();
  core = double.kubeConfig().makeApiClient(CoreV1Api);
  apps = double.kubeConfig().makeApiClient(AppsV1Api);
  net = double.kubeConfig().makeApiClient(NetworkingV1Api);
});
after(() => double.close());

async function apiError(
  p: Promise<unknown>,
): Promise<{ code: number; body: { reason: string; message: string; code: number } }> {
  try {
    await p;
  } catch (err) {
    const e = err as { code: number; body: string };
    return { code: e.code, body: JSON.parse(e.body) };
  }
  assert.fail("expected the call to fail");
}

const deployment = (name: string, labels: Record<string, string> = {}) => ({
  metadata: { name, labels: { app: name, ...labels } },
  spec: {
    replicas: 0,
    selector: { matchLabels: { app: name } },
    template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: "w", image: "worker:1" }] } },
  },
});

describe("object API", () => {
  test("create is 201 with server metadata; a second create is 409 AlreadyExists; a missing get is 404 NotFound", async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: "c1" }, data: { a: "1" } },
    });
    assert.ok(cm.metadata?.uid && cm.metadata.resourceVersion && cm.metadata.creationTimestamp);
    const dup = await apiError(core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "c1" } } }));
    assert.equal(dup.code, 409);
    assert.equal(dup.body.reason, "AlreadyExists");
    assert.equal(dup.body.message, 'configmaps "c1" already exists');
    const missing = await apiError(core.readNamespacedConfigMap({ namespace: ns, name: "nope" }));
    assert.equal(missing.code, 404);
    assert.equal(missing.body.reason, "NotFound");
  });

  test("replace with a stale resourceVersion is 409 Conflict; with the current one it succeeds", async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: "c2" }, data: { v: "1" } },
    });
    const updated = await core.replaceNamespacedConfigMap({
      namespace: ns,
      name: "c2",
      body: { ...cm, data: { v: "2" } },
    });
    assert.notEqual(updated.metadata?.resourceVersion, cm.metadata?.resourceVersion);
    const stale = await apiError(
      core.replaceNamespacedConfigMap({ namespace: ns, name: "c2", body: { ...cm, data: { v: "3" } } }),
    );
    assert.equal(stale.code, 409);
    assert.equal(stale.body.reason, "Conflict");
    assert.equal((await core.readNamespacedConfigMap({ namespace: ns, name: "c2" })).data?.v, "2");
  });

  test("invalid names and labels are 422 Invalid", async () => {
    const bad = await apiError(
      core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "Bad_Name" } } }),
    );
    assert.equal(bad.code, 422);
    assert.equal(bad.body.reason, "Invalid");
    const badLabel = await apiError(
      core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: "ok", labels: { a: "has space" } } } }),
    );
    assert.equal(badLabel.code, 422);
  });

  test("deployments: selector must match the template; label selectors filter lists", async () => {
    const bad = deployment("d-bad");
    bad.spec.template.metadata.labels = { app: "other" };
    assert.equal((await apiError(apps.createNamespacedDeployment({ namespace: ns, body: bad }))).code, 422);
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment("d-a", { tier: "x", tenant: "true" }) });
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment("d-b", { tier: "y", tenant: "true" }) });
    const names = async (labelSelector: string) =>
      (await apps.listNamespacedDeployment({ namespace: ns, labelSelector })).items.map((d) => d.metadata?.name);
    assert.deepEqual(await names("tenant=true"), ["d-a", "d-b"]);
    assert.deepEqual(await names("tenant=true,tier=y"), ["d-b"]);
    assert.deepEqual(await names("tier in (x,z)"), ["d-a"]);
    assert.deepEqual(await names("tier notin (x),tenant"), ["d-b"]);
  });

  test("strategic merge patch of annotations sets and removes keys; merge patch too; other content types are 415", async () => {
    await apps.createNamespacedDeployment({
      namespace: ns,
      body: { ...deployment("d-p"), metadata: { ...deployment("d-p").metadata, annotations: { a: "1", b: "2" } } },
    });
    const smp = await apps.patchNamespacedDeployment(
      { namespace: ns, name: "d-p", body: { metadata: { annotations: { a: null, c: "3" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    assert.deepEqual(smp.metadata?.annotations, { b: "2", c: "3" });
    const mp = await apps.patchNamespacedDeployment(
      { namespace: ns, name: "d-p", body: { metadata: { annotations: { b: null } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.deepEqual(mp.metadata?.annotations, { c: "3" });
    assert.equal(
      double.requests.filter((r) => r.method === "PATCH").at(-1)?.contentType,
      "application/merge-patch+json",
    );
    const res = await fetch(`${double.url}/apis/apps/v1/namespaces/${ns}/deployments/d-p`, {
      method: "PATCH",
      headers: { "content-type": "text/plain" },
      body: "{}",
    });
    assert.equal(res.status, 415);
    // A patch carrying a stale resourceVersion is a precondition failure.
    const stale = await apiError(
      apps.patchNamespacedDeployment(
        { namespace: ns, name: "d-p", body: { metadata: { resourceVersion: "1", annotations: { x: "1" } } } },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(stale.code, 409);
  });

  test("the scale subresource reads and writes spec.replicas and keeps the status consistent", async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment("d-s") });
    const scale = await apps.readNamespacedDeploymentScale({ namespace: ns, name: "d-s" });
    assert.equal(scale.kind, "Scale");
    assert.equal(scale.spec?.replicas, 0);
    await apps.replaceNamespacedDeploymentScale({
      namespace: ns,
      name: "d-s",
      body: { metadata: { name: "d-s" }, spec: { replicas: 2 } },
    });
    const d = await apps.readNamespacedDeployment({ namespace: ns, name: "d-s" });
    assert.equal(d.spec?.replicas, 2);
    assert.equal(d.status?.readyReplicas, 2);
    assert.equal(d.metadata?.generation, 2);
    await apps.patchNamespacedDeploymentScale(
      { namespace: ns, name: "d-s", body: { spec: { replicas: 0 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal((await apps.readNamespacedDeployment({ namespace: ns, name: "d-s" })).spec?.replicas, 0);
    const stale = await apiError(
      apps.replaceNamespacedDeploymentScale({
        namespace: ns,
        name: "d-s",
        body: { metadata: { name: "d-s", resourceVersion: scale.metadata?.resourceVersion }, spec: { replicas: 1 } },
      }),
    );
    assert.equal(stale.code, 409);
    assert.equal((await apiError(apps.readNamespacedDeploymentScale({ namespace: ns, name: "absent" }))).code, 404);
  });

  test("delete: a deployment answers a Success Status, a service its object; deleting again is 404", async () => {
    await apps.createNamespacedDeployment({ namespace: ns, body: deployment("d-del") });
    const status = (await apps.deleteNamespacedDeployment({ namespace: ns, name: "d-del" })) as V1Status;
    assert.equal(status.status, "Success");
    assert.equal((await apiError(apps.deleteNamespacedDeployment({ namespace: ns, name: "d-del" }))).code, 404);
    const svc = await core.createNamespacedService({
      namespace: ns,
      body: { metadata: { name: "s1" }, spec: { selector: { app: "x" }, ports: [{ port: 50051 }] } },
    });
    assert.match(svc.spec?.clusterIP ?? "", /^10\.96\./);
    assert.equal(svc.spec?.ports?.[0].targetPort, 50051);
    const deleted = await core.deleteNamespacedService({ namespace: ns, name: "s1" });
    assert.equal(deleted.metadata?.name, "s1");
  });
});

describe("network policies", () => {
  test("networking.k8s.io/v1 NetworkPolicy: create, get, list by label, delete; bad peers, ports and types are 422", async () => {
    const body = (name: string, sandbox: string) => ({
      metadata: { name, labels: { sandbox } },
      spec: {
        podSelector: { matchLabels: { sandbox } },
        policyTypes: ["Ingress", "Egress"],
        egress: [
          { to: [{ podSelector: { matchLabels: { app: "proxy" } } }], ports: [{ protocol: "TCP", port: 3128 }] },
        ],
      },
    });
    await net.createNamespacedNetworkPolicy({ namespace: ns, body: body("np-a", "a") });
    await net.createNamespacedNetworkPolicy({ namespace: ns, body: body("np-b", "b") });
    const got = await net.readNamespacedNetworkPolicy({ name: "np-a", namespace: ns });
    assert.equal(got.kind, "NetworkPolicy");
    assert.equal(got.spec?.egress?.[0]?.ports?.[0]?.port, 3128);
    assert.equal(
      (await apiError(net.createNamespacedNetworkPolicy({ namespace: ns, body: body("np-a", "a") }))).code,
      409,
    );
    const listed = await net.listNamespacedNetworkPolicy({ namespace: ns, labelSelector: "sandbox=b" });
    assert.deepEqual(
      listed.items.map((n) => n.metadata?.name),
      ["np-b"],
    );
    await net.deleteNamespacedNetworkPolicy({ name: "np-a", namespace: ns });
    assert.equal((await apiError(net.readNamespacedNetworkPolicy({ name: "np-a", namespace: ns }))).code, 404);
    const bad = [
      { ...body("np-c", "c"), spec: { policyTypes: ["Egress"] } },
      { ...body("np-c", "c"), spec: { podSelector: {}, policyTypes: ["Sideways"] } },
      { ...body("np-c", "c"), spec: { podSelector: {}, egress: [{ to: [{ ipBlock: { cidr: "10.0.0.0/33" } }] }] } },
      { ...body("np-c", "c"), spec: { podSelector: {}, egress: [{ ports: [{ protocol: "ICMP", port: 1 }] }] } },
      { ...body("np-c", "c"), spec: { podSelector: {}, egress: [{ ports: [{ port: 70000 }] }] } },
      { ...body("np-c", "c"), spec: { podSelector: {}, egress: [{ to: [{}] }] } },
    ];
    for (const b of bad) {
      const e = await apiError(net.createNamespacedNetworkPolicy({ namespace: ns, body: b as never }));
      assert.equal(e.code, 422, JSON.stringify(b.spec));
      assert.equal(e.body.reason, "Invalid");
    }
  });
});

describe("pods, PVCs and exec", () => {
  const podBody = (name: string, claim: string, deadline?: number) => ({
    metadata: { name },
    spec: {
      restartPolicy: "Never",
      activeDeadlineSeconds: deadline,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: "RuntimeDefault" } },
      containers: [
        {
          name: "main",
          image: "debian:12",
          env: [{ name: "FROM_SPEC", value: "yes" }],
          volumeMounts: [{ name: "ws", mountPath: "/workspace" }],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
        },
      ],
      volumes: [{ name: "ws", persistentVolumeClaim: { claimName: claim } }],
    },
  });
  const pvcBody = (name: string) => ({
    metadata: { name },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  });

  async function waitPhase(name: string, phase: string): Promise<void> {
    for (let i = 0; i < 600; i++) {
      if ((await core.readNamespacedPod({ namespace: ns, name })).status?.phase === phase) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`pod ${name} never reached ${phase}`);
  }

  function exec(
    pod: string,
    command: string[],
    stdin?: string,
  ): Promise<{ out: string; err: string; status: V1Status }> {
    let out = "";
    let err = "";
    const sink = (f: (s: string) => void) =>
      new Writable({
        write(c, _e, cb) {
          f(String(c));
          cb();
        },
      });
    return new Promise((resolve, reject) => {
      const input = stdin === undefined ? null : Readable.from([Buffer.from(stdin)]);
      new Exec(double.kubeConfig())
        .exec(
          ns,
          pod,
          "main",
          command,
          sink((s) => (out += s)),
          sink((s) => (err += s)),
          input,
          false,
          (status) => resolve({ out, err, status }),
        )
        .catch(reject);
    });
  }

  test("a pod waits for its claim, then runs; exec streams stdout/stderr and reports the exit code on the status channel", async () => {
    await core.createNamespacedPod({ namespace: ns, body: podBody("p1", "claim-1") });
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await core.readNamespacedPod({ namespace: ns, name: "p1" })).status?.phase, "Pending");
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvcBody("claim-1") });
    await waitPhase("p1", "Running");
    const ok = await exec("p1", ["sh", "-c", 'echo "$FROM_SPEC" > /workspace/f; cat /workspace/f; echo oops >&2']);
    assert.equal(ok.out, "yes\n");
    assert.equal(ok.err, "oops\n");
    assert.equal(ok.status.status, "Success");
    const bad = await exec("p1", ["sh", "-c", "exit 7"]);
    assert.equal(bad.status.status, "Failure");
    assert.equal(bad.status.reason, "NonZeroExitCode");
    assert.equal(bad.status.details?.causes?.find((c) => c.reason === "ExitCode")?.message, "7");
    // stdin (v5 closes it with the close frame) reaches the process.
    const cat = await exec("p1", ["sh", "-c", "cat > /workspace/in; wc -c < /workspace/in"], "twelve bytes");
    assert.equal(cat.out.trim(), "12");
    // The workspace lives in the claim, the process list is the pod's own.
    const ps = await exec("p1", ["sh", "-c", "ls /proc | grep -c '^[0-9]'"]);
    assert.ok(Number(ps.out) < 10, `pod sees ${ps.out} processes`);
  });

  test("restricted Pod Security: a pod that may run as root or keeps capabilities is 403 Forbidden", async () => {
    const body = podBody("p-root", "claim-x");
    body.spec.securityContext = {} as typeof body.spec.securityContext;
    const denied = await apiError(core.createNamespacedPod({ namespace: ns, body }));
    assert.equal(denied.code, 403);
    assert.equal(denied.body.reason, "Forbidden");
    assert.match(denied.body.message, /violates PodSecurity "restricted:latest": .*runAsNonRoot/);
  });

  test("v4.channel.k8s.io over a raw WebSocket: channel-prefixed frames, the status frame last, then close", async () => {
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvcBody("claim-v4") });
    await core.createNamespacedPod({ namespace: ns, body: podBody("p-v4", "claim-v4") });
    await waitPhase("p-v4", "Running");
    const q = new URLSearchParams([
      ["command", "sh"],
      ["command", "-c"],
      ["command", "printf out; printf err >&2; exit 4"],
      ["stdout", "true"],
      ["stderr", "true"],
    ]);
    const ws = new WebSocket(`${double.url.replace("http", "ws")}/api/v1/namespaces/${ns}/pods/p-v4/exec?${q}`, [
      "v4.channel.k8s.io",
    ]);
    const frames: Buffer[] = [];
    ws.on("message", (d: Buffer) => frames.push(d));
    await new Promise((resolve) => ws.on("close", resolve));
    assert.equal(ws.protocol, "v4.channel.k8s.io");
    const byChannel = (c: number) =>
      Buffer.concat(frames.filter((f) => f[0] === c).map((f) => f.subarray(1))).toString();
    assert.equal(byChannel(1), "out");
    assert.equal(byChannel(2), "err");
    assert.equal(frames.at(-1)?.[0], 3);
    const status = JSON.parse(byChannel(3));
    assert.equal(status.details.causes[0].message, "4");
    // No supported subprotocol: refused before the upgrade.
    const bad = new WebSocket(`${double.url.replace("http", "ws")}/api/v1/namespaces/${ns}/pods/p-v4/exec?${q}`, [
      "base64.channel.k8s.io",
    ]);
    const code = await new Promise((resolve) => bad.on("unexpected-response", (_req, res) => resolve(res.statusCode)));
    assert.equal(code, 400);
  });

  test("a deleted PVC stays while a pod uses it (pvc-protection) and goes with the pod", async () => {
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvcBody("claim-2") });
    await core.createNamespacedPod({ namespace: ns, body: podBody("p2", "claim-2") });
    await waitPhase("p2", "Running");
    await core.deleteNamespacedPersistentVolumeClaim({ namespace: ns, name: "claim-2" });
    const terminating = await core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "claim-2" });
    assert.ok(terminating.metadata?.deletionTimestamp);
    const terminatingPod = await core.deleteNamespacedPod({ namespace: ns, name: "p2" });
    // Graceful deletion: the pod is terminating first, the claim stays until it is gone.
    assert.ok(terminatingPod.metadata?.deletionTimestamp);
    for (let i = 0; i < 100 && double.get("pods", ns, "p2"); i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(
      (await apiError(core.readNamespacedPersistentVolumeClaim({ namespace: ns, name: "claim-2" }))).code,
      404,
    );
  });

  test("activeDeadlineSeconds fails the pod with DeadlineExceeded; exec into it is refused", async () => {
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvcBody("claim-3") });
    await core.createNamespacedPod({ namespace: ns, body: podBody("p3", "claim-3", 1) });
    await waitPhase("p3", "Running");
    await waitPhase("p3", "Failed");
    const pod = await core.readNamespacedPod({ namespace: ns, name: "p3" });
    assert.equal(pod.status?.reason, "DeadlineExceeded");
    await assert.rejects(exec("p3", ["true"]));
  });

  test("a test can OOM-kill the container: the pod reports OOMKilled with exit code 137", async () => {
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: pvcBody("claim-4") });
    await core.createNamespacedPod({ namespace: ns, body: podBody("p4", "claim-4") });
    await waitPhase("p4", "Running");
    double.terminateContainer(ns, "p4", { exitCode: 137, reason: "OOMKilled" });
    const pod = await core.readNamespacedPod({ namespace: ns, name: "p4" });
    assert.equal(pod.status?.phase, "Failed");
    assert.equal(pod.status?.containerStatuses?.[0].state?.terminated?.reason, "OOMKilled");
    assert.equal(pod.status?.containerStatuses?.[0].state?.terminated?.exitCode, 137);
  });
});
