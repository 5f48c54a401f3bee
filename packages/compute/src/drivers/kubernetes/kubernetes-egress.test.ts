// The Kubernetes side of sandbox egress (issue 21 step 6) against the
// API-server double: a sandbox's pod carries the proxy variables with its own
// credential; a sandbox with a policy gets its NetworkPolicy (one way out: the
// egress proxy's pods) with its pod, UpdateNetworkPolicy adds or removes it,
// destroy deletes it. No CNI here: that the NetworkPolicy is enforced is the
// cluster's business and is not tested (see the README).
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { KubeDouble } from "@platform/kube-testing";
import { validateNetworkPolicy } from "@platform/network-policy";
import { verifyProxyCredential } from "../../egress/credentials.ts";
import { collectExec, contractSpec } from "../../testing/driver-contract.ts";
import { EGRESS_PROXY_LABELS, egressPolicyName } from "./egress-policy.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";
import { podName } from "./objects.ts";

const NS = "sandboxes";
const NET = "networking.k8s.io";
const key = randomBytes(32);
const policy = validateNetworkPolicy({ allowedDomains: ["pypi.org", "*.pythonhosted.org"] });

describe("kubernetes driver: sandbox egress through the egress proxy", () => {
  let double: KubeDouble;
  let driver: KubernetesDriver;
  let plain: KubernetesDriver;
  before(async () => {
    double = await KubeDouble.start({ namespaces: [NS] });
    const base = { kubeConfig: double.kubeConfig(NS), namespace: NS, killGraceMs: 200, pollIntervalMs: 50 };
    driver = new KubernetesDriver({ ...base, egress: { address: "egress-proxy:3128", key } });
    plain = new KubernetesDriver(base);
  });
  after(async () => {
    await driver.close();
    await plain.close();
    await double.close();
  });

  const networkPolicy = (id: string) => double.get("networkpolicies", NS, egressPolicyName(id), NET);

  test("without the proxy configured the driver offers no network (the domain answers FAILED_PRECONDITION)", () => {
    assert.equal(plain.setNetworkPolicy, undefined);
    assert.equal(typeof driver.setNetworkPolicy, "function");
  });

  test("a sandbox with a policy: proxy variables with its own credential in the pod (seen by exec), its NetworkPolicy made with the pod and deleted with it", async () => {
    const spec = { ...contractSpec("debian:bookworm-slim"), networkPolicy: policy };
    await driver.create(spec);
    const pod = double.get("pods", NS, podName(spec.sandboxId));
    const env = Object.fromEntries(
      ((pod?.spec.containers[0].env ?? []) as { name: string; value: string }[]).map((e) => [e.name, e.value]),
    );
    for (const name of ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]) {
      const u = new URL(env[name] as string);
      assert.equal(u.protocol, "http:");
      assert.equal(`${u.hostname}:${u.port}`, "egress-proxy:3128");
      assert.equal(verifyProxyCredential(key, u.username, decodeURIComponent(u.password)), spec.sandboxId, name);
    }
    assert.match(
      env.ALL_PROXY as string,
      new RegExp(`^socks5h://${spec.sandboxId}:[A-Za-z0-9_-]{43}@egress-proxy:3128$`),
    );
    assert.equal(env.NO_PROXY, "localhost,127.0.0.1,::1");
    const np = networkPolicy(spec.sandboxId);
    assert.ok(np, "the NetworkPolicy exists once create returns");
    assert.deepEqual(np.spec.podSelector.matchLabels, { "compute.platform.io/sandbox-id": spec.sandboxId });
    assert.equal(pod?.metadata.labels["compute.platform.io/sandbox-id"], spec.sandboxId);
    assert.deepEqual(np.spec.egress, [
      { to: [{ podSelector: { matchLabels: EGRESS_PROXY_LABELS } }], ports: [{ protocol: "TCP", port: 3128 }] },
    ]);
    assert.equal((await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(10_000))).phase, "ready");
    const r = await collectExec(driver, spec.sandboxId, { command: "/bin/sh", args: ["-c", 'echo "$HTTPS_PROXY"'] });
    assert.equal(r.stdout.trim(), env.HTTPS_PROXY);
    await driver.destroy(spec.sandboxId);
    assert.equal(networkPolicy(spec.sandboxId), undefined, "deleted with the sandbox");
  });

  test("a sandbox without a policy has no NetworkPolicy (no way out); UpdateNetworkPolicy adds it, clearing removes it", async () => {
    const spec = contractSpec("debian:bookworm-slim");
    await driver.create(spec);
    assert.equal(networkPolicy(spec.sandboxId), undefined);
    await driver.setNetworkPolicy?.(spec.sandboxId, policy);
    assert.ok(networkPolicy(spec.sandboxId));
    await driver.setNetworkPolicy?.(spec.sandboxId, validateNetworkPolicy({ allowAll: true }));
    assert.ok(networkPolicy(spec.sandboxId), "a second policy keeps the one NetworkPolicy");
    await driver.setNetworkPolicy?.(spec.sandboxId, undefined);
    assert.equal(networkPolicy(spec.sandboxId), undefined);
    await driver.setNetworkPolicy?.(spec.sandboxId, undefined);
    await driver.destroy(spec.sandboxId);
    assert.equal(double.list("networkpolicies", NS, NET).length, 0);
  });
});

test("a sandbox's usage carries the bytes the egress proxy recorded for it", async () => {
  const double = await KubeDouble.start({ namespaces: [NS] });
  const recorded = new Map<string, { egressBytes: number; ingressBytes: number }>();
  const driver = new KubernetesDriver({
    kubeConfig: double.kubeConfig(NS),
    namespace: NS,
    pollIntervalMs: 50,
    egress: { address: "egress-proxy:3128", key },
    networkTotals: async (id) => recorded.get(id) ?? { egressBytes: 0, ingressBytes: 0 },
  });
  try {
    const spec = { ...contractSpec("debian:bookworm-slim"), networkPolicy: policy };
    await driver.create(spec);
    await driver.waitSettled(spec.sandboxId, AbortSignal.timeout(10_000));
    recorded.set(spec.sandboxId, { egressBytes: 1234, ingressBytes: 98_765 });
    const u = await driver.usage(spec.sandboxId);
    assert.equal(u.networkEgressBytes, 1234);
    assert.equal(u.networkIngressBytes, 98_765);
    const last = await driver.destroy(spec.sandboxId);
    assert.equal(last.networkIngressBytes, 98_765);
  } finally {
    await driver.close();
    await double.close();
  }
});

test("a create the cluster refuses leaves no NetworkPolicy behind", async () => {
  const double = await KubeDouble.start({ namespaces: [NS] });
  // uid 0: restricted Pod Security refuses the pod (403) after the NetworkPolicy was made.
  const driver = new KubernetesDriver({
    kubeConfig: double.kubeConfig(NS),
    namespace: NS,
    runAsUser: 0,
    egress: { address: "egress-proxy:3128", key },
  });
  try {
    const spec = { ...contractSpec("debian:bookworm-slim"), networkPolicy: policy };
    await assert.rejects(driver.create(spec));
    assert.equal(double.list("pods", NS).length, 0);
    assert.equal(double.list("networkpolicies", NS, NET).length, 0);
  } finally {
    await driver.close();
    await double.close();
  }
});
