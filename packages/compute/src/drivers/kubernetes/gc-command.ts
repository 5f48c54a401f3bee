#!/usr/bin/env -S node --import tsx
// The compute GC CronJob's program: deletes the sandbox PVCs whose
// compute.platform.io/delete-after has passed, through the API server with
// the job's service account (list + delete on persistentvolumeclaims).
//   node --import tsx packages/compute/src/drivers/kubernetes/gc-command.ts [--now ISO-TIME]
import { parseArgs } from "node:util";
import { KubeConfig } from "@kubernetes/client-node";
import { KubernetesDriver } from "./kubernetes-driver.ts";

const { values } = parseArgs({ options: { now: { type: "string" } } });
const now = values.now ? new Date(values.now) : new Date();
if (Number.isNaN(now.getTime())) {
  console.error("compute-gc: --now must be an ISO time");
  process.exit(2);
}
const kubeConfig = new KubeConfig();
kubeConfig.loadFromDefault();
const namespace =
  process.env.COMPUTE_NAMESPACE || kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace || "default";
const driver = new KubernetesDriver({ kubeConfig, namespace });
const removed = await driver.collectGarbage(now);
await driver.close();
console.log(JSON.stringify({ namespace, now: now.toISOString(), removed }));
