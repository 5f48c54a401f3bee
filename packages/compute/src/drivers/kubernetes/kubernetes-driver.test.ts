import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import { KubeDouble } from "@platform/kube-testing";
import { DELETE_AFTER_KEY } from "../../driver.ts";
import { collectExec, contractSpec, driverContract } from "../../testing/driver-contract.ts";
import { KubernetesDriver } from "./kubernetes-driver.ts";
import { claimName, podName } from "./objects.ts";

const NS = "sandboxes";

driverContract("kubernetes (API-server double)", async (o) => {
  const double = await KubeDouble.start({ namespaces: [NS] });
  const driver = new KubernetesDriver({ kubeConfig: double.kubeConfig(NS), namespace: NS, killGraceMs: o.killGraceMs, pollIntervalMs: 50, defaultSize: "1Gi" });
  return { driver, image: "debian:bookworm-slim", cleanup: () => double.close() };
});
