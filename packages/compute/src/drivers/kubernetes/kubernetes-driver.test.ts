import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { KubeDouble } from "@platform/kube-testing";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { until } from "../../testing/until.ts";
import { KubernetesDriver, parseContainerUsage } from "./kubernetes-driver.ts";
import { claimName, podName } from "./objects.ts";

const NS = "sandboxes";

// The driver contract runs in kubernetes-contract.test.ts.

describe("kubernetes driver: what lands on the cluster", () => {
  let double: KubeDouble;
  let driver: KubernetesDriver;
  before(async () => {
    double = await KubeDouble.start({ namespaces: [NS] });
    driver = new KubernetesDriver({
      kubeConfig: double.kubeConfig(NS),
      namespace: NS,
      killGraceMs: 200,
      pollIntervalMs: 50,
      defaultStorageClass: "fast-ssd",
      defaultSize: "2Gi",
    });
  });
  after(async () => {
    await driver.close();
    await double.close();
  });

  test("pod and PVC: annotations, storage from the spec or the defaults, requests = limits, deadline, restricted security", async () => {
    const spec = contractSpec("debian:bookworm-slim", {
      cpuMillis: 500,
      memoryBytes: 512 * 1024 * 1024,
      maxRuntimeMs: 15 * 60_000,
    });
    spec.workspace = { storageClass: "", size: "", mountPath: "/workspace" };
    await driver.create(spec);
    const pod = double.get("pods", NS, podName(spec.sandboxId));
    const pvc = double.get("persistentvolumeclaims", NS, claimName(spec.tenantId, spec.sessionId));
    assert.ok(pod && pvc);
    assert.equal(pod.metadata.annotations.tenant_id, spec.tenantId);
    assert.equal(pvc.spec.storageClassName, "fast-ssd");
    assert.equal(pvc.spec.resources.requests.storage, "2Gi");
    const c = pod.spec.containers[0];
    assert.deepEqual(c.resources.limits, { cpu: "500m", memory: String(512 * 1024 * 1024) });
    assert.deepEqual(c.resources.requests, c.resources.limits);
    assert.ok(
      pod.spec.activeDeadlineSeconds >= 899 && pod.spec.activeDeadlineSeconds <= 900,
      String(pod.spec.activeDeadlineSeconds),
    );
    assert.equal(pod.spec.automountServiceAccountToken, false);
    assert.equal(pod.spec.securityContext.runAsNonRoot, true);
    assert.equal(pod.spec.securityContext.seccompProfile.type, "RuntimeDefault");
    assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    assert.deepEqual(
      c.volumeMounts.find((m: { name: string }) => m.name === "workspace"),
      { name: "workspace", mountPath: "/workspace" },
    );
    const custom = contractSpec("debian:bookworm-slim");
    custom.workspace = { storageClass: "standard", size: "7Gi", mountPath: "/data" };
    await driver.create(custom);
    const pvc2 = double.get("persistentvolumeclaims", NS, claimName(custom.tenantId, custom.sessionId));
    assert.equal(pvc2?.spec.storageClassName, "standard");
    assert.equal(pvc2?.spec.resources.requests.storage, "7Gi");
    assert.equal(
      double.get("pods", NS, podName(custom.sandboxId))?.spec.containers[0].volumeMounts[0].mountPath,
      "/data",
    );
    await driver.destroy(spec.sandboxId);
    await driver.destroy(custom.sandboxId);
  });

  test("an OOMKilled container reads as failed with reason oom, announced to listeners; the session's next sandbox has its files", async () => {
    const spec = contractSpec("debian:bookworm-slim");
    await driver.create(spec);
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(10_000))).phase, "ready");
    const seen: string[] = [];
    const off = driver.onPhaseChange((id, o) => id === spec.sandboxId && seen.push(`${o.phase}/${o.reason}`));
    await driver.writeFile(spec.sandboxId, "before-oom.txt", new TextEncoder().encode("kept"), false, 0o644);
    double.terminateContainer(NS, podName(spec.sandboxId), { exitCode: 137, reason: "OOMKilled" });
    const o = await driver.observe(spec.sandboxId);
    assert.equal(o.phase, "failed");
    assert.equal(o.reason, "oom");
    assert.equal(o.exitCode, 137);
    assert.ok(seen.includes("failed/oom"), seen.join(","));
    off();
    // Nothing of the session runs: its claim is marked; the session's next sandbox reuses it and clears the mark.
    const claim = () => double.get("persistentvolumeclaims", NS, claimName(spec.tenantId, spec.sessionId));
    await until(
      "the claim marked for deletion",
      () => claim()?.metadata.annotations[DELETE_AFTER_KEY] !== undefined,
      5000,
    );
    const next = { ...contractSpec("debian:bookworm-slim"), tenantId: spec.tenantId, sessionId: spec.sessionId };
    await driver.create(next);
    assert.equal((await driver.waitSettled(next.sandboxId, AbortSignal.timeout(10_000))).phase, "ready");
    assert.equal(claim()?.metadata.annotations[DELETE_AFTER_KEY], undefined);
    assert.equal(
      new TextDecoder().decode((await driver.readFile(next.sandboxId, "before-oom.txt", 0, 100)).data),
      "kept",
    );
    await driver.destroy(spec.sandboxId);
    await driver.destroy(next.sandboxId);
  });

  test("destroy deletes the pod and marks the PVC delete-after = now + 24 h; GC deletes only expired claims", async () => {
    const a = contractSpec("debian:bookworm-slim");
    const b = contractSpec("debian:bookworm-slim");
    const live = contractSpec("debian:bookworm-slim");
    for (const s of [a, b, live]) await driver.create(s);
    await driver.waitSettled(a.sandboxId, AbortSignal.timeout(10_000));
    const t0 = Date.now();
    await driver.destroy(a.sandboxId);
    // Graceful deletion: terminating first, gone once the kubelet confirms.
    const terminating = double.get("pods", NS, podName(a.sandboxId));
    assert.ok(terminating === undefined || terminating.metadata.deletionTimestamp, "deleted or terminating");
    assert.equal((await driver.observe(a.sandboxId)).phase, "gone");
    await until("the pod deleted", () => double.get("pods", NS, podName(a.sandboxId)) === undefined, 5000);
    const mark = Date.parse(
      double.get("persistentvolumeclaims", NS, claimName(a.tenantId, a.sessionId))?.metadata.annotations[
        DELETE_AFTER_KEY
      ],
    );
    assert.ok(Math.abs(mark - (t0 + 24 * 3600_000)) < 60_000, `delete-after ${new Date(mark).toISOString()}`);
    // b is destroyed later; GC at a time between the two marks removes only a.
    await new Promise((r) => setTimeout(r, 1100));
    await driver.destroy(b.sandboxId);
    const between = new Date(mark + 500);
    const first = await driver.collectGarbage(between);
    assert.ok(
      first.includes(a.sandboxId) && !first.includes(b.sandboxId) && !first.includes(live.sandboxId),
      first.join(","),
    );
    assert.equal(double.get("persistentvolumeclaims", NS, claimName(a.tenantId, a.sessionId)), undefined);
    assert.ok(double.get("persistentvolumeclaims", NS, claimName(b.tenantId, b.sessionId)));
    // A live sandbox's claim is never collected, however late.
    const far = await driver.collectGarbage(new Date(Date.now() + 365 * 86400_000));
    assert.ok(far.includes(b.sandboxId));
    assert.ok(!far.includes(live.sandboxId));
    assert.ok(double.get("persistentvolumeclaims", NS, claimName(live.tenantId, live.sessionId)));
    await driver.destroy(live.sandboxId);
  });

  test("a fresh driver (after a compute restart) re-attaches: recover, exec and files work from the cluster state", async () => {
    const spec = contractSpec("debian:bookworm-slim");
    await driver.create(spec);
    await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(10_000));
    await driver.writeFile(spec.sandboxId, "kept.txt", new TextEncoder().encode("still here"), false, 0o644);
    const again = new KubernetesDriver({ kubeConfig: double.kubeConfig(NS), namespace: NS, pollIntervalMs: 50 });
    assert.equal((await again.recover(spec)).phase, "ready");
    const r = await collectExec(again, spec.sandboxId, { command: "/bin/cat", args: ["kept.txt"] });
    assert.equal(r.stdout, "still here");
    await again.destroy(spec.sandboxId);
    assert.equal((await driver.observe(spec.sandboxId)).phase, "gone");
    await again.close();
    await assert.rejects(driver.observe(randomUUID()));
  });

  test("a sandbox whose pod the API server is slow to make is starting, never lost, and its session's claim stays unmarked", async () => {
    // The API server answers the pod's creation 600 ms late while the poller runs every 50 ms.
    const slow = http.createServer((req, res) => {
      const upstream = http.request(
        `${double.url}${req.url}`,
        { method: req.method, headers: req.headers },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      const podCreation = req.method === "POST" && /\/pods$/.test(req.url ?? "");
      setTimeout(() => req.pipe(upstream), podCreation ? 600 : 0);
    });
    // Exec and usage reads are WebSocket upgrades: passed through as bytes.
    slow.on("upgrade", (req, socket, head) => {
      const upstream = net.connect(Number(new URL(double.url).port), "127.0.0.1", () => {
        const headers = req.rawHeaders.map((v, i) => (i % 2 ? `${v}\r\n` : `${v}: `)).join("");
        upstream.write(`${req.method} ${req.url} HTTP/1.1\r\n${headers}\r\n`);
        upstream.write(head);
        socket.pipe(upstream).pipe(socket);
      });
      upstream.on("error", () => socket.destroy());
      socket.on("error", () => upstream.destroy());
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    const kc = double.kubeConfig(NS);
    kc.clusters[0] = { ...kc.clusters[0]!, server: `http://127.0.0.1:${(slow.address() as AddressInfo).port}` };
    const late = new KubernetesDriver({ kubeConfig: kc, namespace: NS, pollIntervalMs: 50 });
    try {
      const first = contractSpec("debian:bookworm-slim");
      await late.create(first);
      await late.waitSettled(first.sandboxId, AbortSignal.timeout(10_000));
      const seen: string[] = [];
      const off = late.onPhaseChange((_id, o) => seen.push(o.phase));
      // The poller is running (the first sandbox is live) when the second create starts.
      const next = { ...contractSpec("debian:bookworm-slim"), tenantId: first.tenantId, sessionId: first.sessionId };
      const made = late.create(next);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal((await late.observe(next.sandboxId)).phase, "starting");
      await made;
      assert.equal((await late.waitSettled(next.sandboxId, AbortSignal.timeout(10_000))).phase, "ready");
      off();
      assert.ok(!seen.includes("failed"), seen.join(","));
      const claim = double.get("persistentvolumeclaims", NS, claimName(next.tenantId, next.sessionId));
      assert.equal(claim?.metadata.annotations?.[DELETE_AFTER_KEY], undefined);
      await late.destroy(first.sandboxId);
      await late.destroy(next.sandboxId);
    } finally {
      await late.close();
      await new Promise((r) => slow.close(r));
    }
  });
});

test("parseContainerUsage reads cgroup v2 counters and leaves fields out when the cgroup is not visible", () => {
  const u = parseContainerUsage(
    "#cpu\n1234567\n#mem\n52428800\n#io\n8:0 rbytes=100 wbytes=200 rios=1 wios=2\n8:16 rbytes=1 wbytes=2\n",
  );
  assert.deepEqual(u, { cpuMs: 1235, memoryPeakBytes: 52428800, diskReadBytes: 101, diskWriteBytes: 202 });
  assert.deepEqual(parseContainerUsage("#cpu\n#mem\n#io\n"), {});
});
