// The rendered NetworkPolicy of a Kubernetes sandbox with a network policy
// (issue 21): it selects that sandbox's pod only, and its one egress is the
// egress proxy on TCP 3128 (no DNS, no ipBlock, no ingress).
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";
import { contractSpec } from "../../testing/driver-contract.ts";
import { buildEgressPolicy, EGRESS_PROXY_LABELS } from "./egress-policy.ts";
import { buildPod } from "./objects.ts";

const matches = (selector: Record<string, string>, labels: Record<string, string> = {}) =>
  Object.entries(selector).every(([k, v]) => labels[k] === v);

test("a sandbox's egress NetworkPolicy selects its pod alone and allows only the egress proxy", () => {
  const spec = contractSpec("debian:bookworm-slim");
  const other = { ...contractSpec("debian:bookworm-slim"), sandboxId: randomUUID() };
  const options = { runAsUser: 1000, defaultStorageClass: "", defaultSize: "5Gi", tmpSize: "1Gi" };
  const np = buildEgressPolicy(spec.sandboxId);
  const selector = np.spec?.podSelector?.matchLabels ?? {};
  assert.ok(matches(selector, buildPod(spec, options).metadata?.labels), "selects the sandbox's pod");
  assert.ok(!matches(selector, buildPod(other, options).metadata?.labels), "and no other sandbox's");
  assert.deepEqual(np.spec?.policyTypes, ["Ingress", "Egress"]);
  assert.deepEqual(np.spec?.ingress, []);
  assert.equal(np.spec?.egress?.length, 1);
  const rule = np.spec?.egress?.[0];
  assert.deepEqual(rule?.ports, [{ protocol: "TCP", port: 3128 }]);
  assert.deepEqual(rule?.to, [{ podSelector: { matchLabels: EGRESS_PROXY_LABELS } }]);
  // Ports, not the whole object: a random sandbox id in the name holds "53" in about one run of eight.
  const ports = (np.spec?.egress ?? []).flatMap((r) => r.ports ?? []).map((p) => p.port);
  assert.ok(!JSON.stringify(np).includes("ipBlock") && !ports.includes(53), "no DNS, no address range");
  assert.match(np.metadata?.name ?? "", /^sbx-[0-9a-f-]{36}-egress$/);
  assert.ok((np.metadata?.name ?? "").length <= 253);
});
