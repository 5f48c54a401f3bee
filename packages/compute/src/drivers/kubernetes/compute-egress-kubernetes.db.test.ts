// Sandbox egress on the Kubernetes shape end to end (issue 21 step 6):
// ComputeService over gRPC with the Kubernetes driver against the API-server
// double, and the egress proxy service on 127.0.0.1 sharing compute's
// database. The pod's proxy variables are used by curl from the test (the
// double's pods have no network of their own to enforce; a CNI is not here):
// CreateSandbox's policy is enforced, ListNetworkEvents and Describe/Destroy
// usage read what the proxy recorded, UpdateNetworkPolicy applies to the next
// connection and adds/removes the NetworkPolicy.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type Server } from "node:http";
import { after, before, test } from "node:test";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import type { Database } from "@platform/db";
import { ComputeService } from "@platform/gen/compute/v1/compute_pb";
import { KubeDouble } from "@platform/kube-testing";
import { pino } from "pino";
import { type ComputeApp, createComputeApp, runMigrations } from "../../app.ts";
import { createResolver } from "../../egress/resolver.ts";
import { startEgressService } from "../../egress/service.ts";
import { KyselyNetworkEventStore } from "../../store/kysely-network-event-store.ts";
import { KyselySandboxStore } from "../../store/kysely-sandbox-store.ts";
import { testComputeConfig } from "../../testing/config.ts";
import { egressPolicyName } from "./egress-policy.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";
import { podName } from "./objects.ts";
import { createComputeTestDatabase } from "../../testing/database.ts";

const NS = "sandboxes";
const key = randomBytes(32);
let double: KubeDouble;
let database: Database<unknown>;
let app: ComputeApp;
let proxy: Awaited<ReturnType<typeof startEgressService>>;
let client: Client<typeof ComputeService>;
let upstream: Server;
let upPort = 0;

before(async () => {
  double = await KubeDouble.start({ namespaces: [NS] });
  database = await createComputeTestDatabase();
  await runMigrations(database);
  upstream = createServer((_req, res) => res.end("x".repeat(10_000)));
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", () => r()));
  upPort = (upstream.address() as { port: number }).port;
  const events = new KyselyNetworkEventStore(database);
  proxy = await startEgressService({
    host: "127.0.0.1",
    port: 0,
    key,
    sandboxes: new KyselySandboxStore(database),
    events,
    resolver: createResolver({
      hosts: new Map([
        ["allowed.test", ["127.0.0.1"]],
        ["elsewhere.test", ["127.0.0.2"]],
      ]),
    }),
    protectedPorts: [5432],
  });
  const driver = new KubernetesDriver({
    kubeConfig: double.kubeConfig(NS),
    namespace: NS,
    killGraceMs: 300,
    pollIntervalMs: 50,
    egress: { address: `127.0.0.1:${proxy.port}`, key },
    networkTotals: (id) => events.totals(id),
  });
  const config = testComputeConfig({
    COMPUTE_DATA_DIR: "/tmp/unused-by-the-kubernetes-driver",
    COMPUTE_DRIVER: "kubernetes",
  });
  app = await createComputeApp(config, pino({ level: "silent" }), { driver, database, internalTls: undefined });
  const { url } = await app.server.listen();
  client = createClient(ComputeService, createGrpcTransport({ baseUrl: url }));
});

after(async () => {
  await app?.close();
  await proxy?.close();
  upstream?.close();
  await database?.close();
  await double?.close();
});

const podEnvs = new Map<string, string[]>();

/** curl with exactly the proxy variables the sandbox's pod carries (read once: the pod goes with destroy). */
function curlAsPod(sandboxId: string, url: string): Promise<string> {
  let env = podEnvs.get(sandboxId);
  if (!env) {
    const pod = double.get("pods", NS, podName(sandboxId));
    env = ((pod?.spec.containers[0].env ?? []) as { name: string; value: string }[]).map((e) => `${e.name}=${e.value}`);
    assert.ok(
      env.some((e) => e.startsWith("HTTP_PROXY=")),
      "the pod carries the proxy variables",
    );
    podEnvs.set(sandboxId, env);
  }
  return new Promise((resolve) =>
    execFile(
      "env",
      ["-i", ...env, "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", url],
      (_err, stdout) => resolve(stdout),
    ),
  );
}

test("CreateSandbox's policy on Kubernetes: enforced by the proxy, events in ListNetworkEvents, bytes in Describe and Destroy, updates on the next connection", async () => {
  const networkPolicy = { allowedDomains: ["allowed.test"], allowedCidrs: [{ cidr: "127.0.0.1/32", ports: [upPort] }] };
  const { sandboxId } = await client.createSandbox({ tenantId: randomUUID(), sessionId: randomUUID(), networkPolicy });
  assert.ok(double.get("networkpolicies", NS, egressPolicyName(sandboxId), "networking.k8s.io"));
  assert.equal(await curlAsPod(sandboxId, `http://allowed.test:${upPort}/`), "200");
  assert.equal(await curlAsPod(sandboxId, `http://elsewhere.test:${upPort}/`), "403");
  await proxy.proxy.settled(sandboxId);
  const listed = await client.listNetworkEvents({ sandboxId });
  assert.deepEqual(
    listed.events.map((e) => [e.host, e.allowed, e.reason]),
    [
      ["allowed.test", true, ""],
      ["elsewhere.test", false, "private_address"],
    ],
  );
  const ingress = listed.events[0]?.ingressBytes ?? 0n;
  assert.ok(ingress > 10_000n, String(ingress));
  const described = await client.describeSandbox({ sandboxId });
  assert.equal(described.currentUsage?.networkIngressBytes, ingress);
  assert.ok((described.currentUsage?.networkEgressBytes ?? 0n) > 0n);

  // Cleared: the NetworkPolicy goes and the proxy refuses the next connection.
  await client.updateNetworkPolicy({ sandboxId });
  assert.equal(double.get("networkpolicies", NS, egressPolicyName(sandboxId), "networking.k8s.io"), undefined);
  assert.equal(await curlAsPod(sandboxId, `http://allowed.test:${upPort}/`), "403");
  await client.updateNetworkPolicy({ sandboxId, networkPolicy });
  assert.ok(double.get("networkpolicies", NS, egressPolicyName(sandboxId), "networking.k8s.io"));
  assert.equal(await curlAsPod(sandboxId, `http://allowed.test:${upPort}/`), "200");
  await proxy.proxy.settled(sandboxId);

  const destroyed = await client.destroySandbox({ sandboxId });
  assert.ok((destroyed.totalUsage?.networkIngressBytes ?? 0n) >= 2n * ingress);
  assert.equal(double.get("networkpolicies", NS, egressPolicyName(sandboxId), "networking.k8s.io"), undefined);
  // A destroyed sandbox's credential opens nothing.
  assert.equal(await curlAsPod(sandboxId, `http://allowed.test:${upPort}/`), "407");
});
